// Hosts by trust, for the session; a write to a tool-only host is flagged.
#include "userspace/guard/mirror_watch.h"

#include <algorithm>
#include <cctype>

namespace faultline {
// File-local names are unique in the library: it compiles as unity batches.
namespace mirror_detail {

constexpr size_t kMaxHostsPerText = 256;
constexpr size_t kMaxHostsPerSession = 16384;

bool mirror_host_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_';
}

std::string mirror_lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

bool mirror_is_ipv4(std::string_view h) {
  int dots = 0;
  for (char c : h) {
    if (c == '.')
      ++dots;
    else if (!std::isdigit(static_cast<unsigned char>(c)))
      return false;
  }
  return dots == 3;
}

// A name with two labels at least whose last is a top-level domain, or an IPv4 address.
bool mirror_plausible_host(std::string_view h, const TldSet& tlds) {
  while (!h.empty() && h.back() == '.') h.remove_suffix(1);
  if (h.empty() || h.size() > 253) return false;
  if (mirror_is_ipv4(h)) return true;
  const size_t dot = h.rfind('.');
  if (dot == std::string_view::npos || dot == 0) return false;
  return tlds.contains(h.substr(dot + 1));
}

}  // namespace mirror_detail

using namespace mirror_detail;

std::vector<std::string> hosts_named_in(std::string_view text, const TldSet& tlds) {
  std::vector<std::string> out;
  auto add = [&](std::string h) {
    if (out.size() < kMaxHostsPerText && std::find(out.begin(), out.end(), h) == out.end()) out.push_back(std::move(h));
  };
  size_t i = 0;
  while (i < text.size() && out.size() < kMaxHostsPerText) {
    if (!mirror_host_char(text[i])) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < text.size() && mirror_host_char(text[end])) ++end;
    std::string_view word = text.substr(i, end - i);
    // scheme://host[:port]: the word before "://" is the scheme.
    if (text.substr(end, 3) == "://") {
      size_t h = end + 3;
      size_t he = h;
      while (he < text.size() && mirror_host_char(text[he])) ++he;
      std::string host = mirror_lower(text.substr(h, he - h));
      size_t pe = he;
      if (pe < text.size() && text[pe] == ':') {
        ++pe;
        while (pe < text.size() && std::isdigit(static_cast<unsigned char>(text[pe]))) ++pe;
      }
      if (!host.empty() && (mirror_plausible_host(host, tlds) || host == "localhost"))
        add(pe > he + 1 ? host + std::string(text.substr(he, pe - he)) : host);
      i = pe > he ? pe : he;
      continue;
    }
    const std::string host = mirror_lower(word);
    if (word.find('.') != std::string_view::npos && mirror_plausible_host(host, tlds)) {
      size_t pe = end;
      if (pe < text.size() && text[pe] == ':') {
        ++pe;
        while (pe < text.size() && std::isdigit(static_cast<unsigned char>(text[pe]))) ++pe;
      }
      add(pe > end + 1 ? host + std::string(text.substr(end, pe - end)) : host);
      end = pe;
    }
    i = end;
  }
  return out;
}

Result<std::unique_ptr<MirrorWatch>> MirrorWatch::create() {
  auto tlds = TldSet::load();
  if (!tlds) return tlds.error();
  return std::unique_ptr<MirrorWatch>(new MirrorWatch(std::move(*tlds)));
}

void MirrorWatch::learn(const std::vector<PromptSegment>& segments) {
  std::lock_guard lock(mu_);
  for (const PromptSegment& s : segments) {
    auto& into = s.source == PromptSource::tool_result ? from_tools_ : trusted_;
    for (std::string& h : hosts_named_in(s.text, tlds_))
      if (into.size() < kMaxHostsPerSession) into.insert(std::move(h));
  }
}

std::string MirrorWatch::judge(std::string_view method, std::string_view host, uint16_t port,
                               std::string_view target) const {
  const bool write = method == "POST" || method == "PUT" || method == "PATCH";
  const size_t q = target.find('?');
  const bool query = q != std::string_view::npos && q + 1 < target.size();
  if (!write && !query) return {};
  const std::string bare = mirror_lower(host);
  const std::string with_port =
      (bare.find(':') != std::string::npos ? "[" + bare + "]" : bare) + ":" + std::to_string(port);
  std::lock_guard lock(mu_);
  for (const std::string& key : {with_port, bare})
    if (trusted_.contains(key)) return {};
  for (const std::string& key : {with_port, bare})
    if (from_tools_.contains(key)) return key;
  return {};
}

}  // namespace faultline
