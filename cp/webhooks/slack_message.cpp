// The envelope rendered for Slack's incoming webhooks.
#include "cp/webhooks/slack_message.h"

namespace faultline::cp {
namespace {

// Slack's limits: a header's plain text 150 characters, a section's text
// 3000, a field's 2000, ten fields a section.
constexpr size_t kHeaderMax = 150, kTextMax = 3000, kFieldMax = 2000, kFieldsMax = 10;

std::string cut(const std::string& s, size_t max) {
  if (s.size() <= max) return s;
  size_t end = max - 3;
  while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) --end;  // not inside a UTF-8 character
  return s.substr(0, end) + "...";
}

std::string escape_mrkdwn(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '&')
      out += "&amp;";
    else if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else
      out += c;
  }
  return out;
}

std::string text_of(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

}  // namespace

bool is_slack_webhook_url(const std::string& url) { return url.starts_with("https://hooks.slack.com/"); }

nlohmann::json slack_message(const nlohmann::json& envelope) {
  const std::string title = envelope.value("title", "");
  const std::string text = envelope.value("text", "");
  nlohmann::json blocks = nlohmann::json::array();
  blocks.push_back({{"type", "header"}, {"text", {{"type", "plain_text"}, {"text", cut(title, kHeaderMax)}}}});
  if (!text.empty())
    blocks.push_back(
        {{"type", "section"}, {"text", {{"type", "mrkdwn"}, {"text", cut(escape_mrkdwn(text), kTextMax)}}}});
  nlohmann::json fields = nlohmann::json::array();
  if (envelope.contains("fields") && envelope["fields"].is_object())
    for (const auto& [name, value] : envelope["fields"].items()) {
      if (value.is_null() || (value.is_string() && value.get<std::string>().empty())) continue;
      if (fields.size() == kFieldsMax) break;
      fields.push_back({{"type", "mrkdwn"},
                        {"text", cut("*" + escape_mrkdwn(name) + "*\n" + escape_mrkdwn(text_of(value)), kFieldMax)}});
    }
  if (!fields.empty()) blocks.push_back({{"type", "section"}, {"fields", fields}});
  blocks.push_back({{"type", "context"},
                    {"elements",
                     {{{"type", "mrkdwn"},
                       {"text", escape_mrkdwn(envelope.value("source", "") + " · " + envelope.value("trigger", "") +
                                              " · " + envelope.value("sent_at", ""))}}}}});
  return {{"text", cut(escape_mrkdwn(title + (text.empty() ? "" : ": " + text)), kTextMax)}, {"blocks", blocks}};
}

}  // namespace faultline::cp
