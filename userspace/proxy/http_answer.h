// The responses the proxy writes itself: a status fault's, a limit's (400, 408,
// 431) and the LLM presets', byte for byte as the providers send them.
#pragma once

#include <cstdint>
#include <ctime>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "userspace/proxy/http_fault.h"

namespace faultline {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

// "HTTP/1.1 <status> <reason>", the headers, Content-Length, "Connection: close"
// when !keep_alive, the body. A 204 or 304 gets neither body nor length; a
// `head_request` answer gets the length but not the body.
[[nodiscard]] std::string compose_http_response(int status, const HeaderList& headers, std::string_view body,
                                                bool keep_alive, bool head_request = false);

// The reason phrase the proxy writes ("Too Many Requests"; 529 "Overloaded").
[[nodiscard]] std::string_view reason_phrase(int status);

// The provider a request goes to, when the fault does not say: the host
// (api.anthropic.com, *.openai.com, ...), then an anthropic-version header,
// then the path (/v1/messages is Anthropic's); otherwise OpenAI.
[[nodiscard]] LlmProvider infer_llm_provider(std::string_view host, std::string_view path, bool has_anthropic_version);

struct LlmAnswer {
  int status = 0;
  HeaderList headers;  // without Content-Length (compose adds it)
  std::string body;
};

// The answer of an error preset (every preset but stream-cut) as `provider`
// sends it at wall-clock time `now`; `seed` makes the request ids.
[[nodiscard]] LlmAnswer llm_answer(LlmPreset preset, LlmProvider provider, int64_t retry_after_s, uint64_t seed,
                                   std::time_t now);

}  // namespace faultline
