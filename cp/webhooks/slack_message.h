// A webhook envelope ({source, trigger, title, text, fields, sent_at}) as a
// Slack incoming-webhook message: `text` (the notification's fallback) and
// Block Kit blocks (a header, the text, the fields, a context line). Slack's
// mrkdwn control characters (&, <, >) are escaped, so a finding's host or path
// can never become a link or a mention; each piece is cut to Slack's limits.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace faultline::cp {

// True for a URL Slack gives for incoming webhooks (https://hooks.slack.com/...).
[[nodiscard]] bool is_slack_webhook_url(const std::string& url);

[[nodiscard]] nlohmann::json slack_message(const nlohmann::json& envelope);

}  // namespace faultline::cp
