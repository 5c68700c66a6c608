// The intent judge's HTTP call: the request and answer shapes are the
// firewall's (intent_firewall.cpp); this file sends them.
#include "ctl/guard_intent_judge.h"

#include <cstdlib>

#include "userspace/guardrails/http_client.h"

namespace faultline {

Result<IntentFirewall::Judge> make_intent_judge(const IntentJudgeConfig& config) {
  auto url = parse_http_url(config.url);
  if (!url) return input_error(0, "--intent-judge-url " + config.url + ": " + url.error().message);
  const std::optional<IntentJudgeShape> shape = intent_judge_shape_for(url->path);
  if (!shape)
    return input_error(0, "--intent-judge-url " + config.url +
                              ": its path must end in /v1/messages (Anthropic) or /chat/completions (OpenAI)");
  const char* key = std::getenv(config.key_env.c_str());
  if (key == nullptr || *key == '\0')
    return input_error(0, "--intent-judge-url: the judge's API key variable " + config.key_env +
                              " is unset or empty (--intent-judge-key-env names another)");
  HttpClientOptions o;
  o.tls = url->tls;
  o.max_body = 256 * 1024;
  auto client = HttpClient::create(o);
  if (!client) return client.error();
  HttpCall call;
  call.method = "POST";
  if (*shape == IntentJudgeShape::anthropic)
    call.headers = {{"x-api-key", key}, {"anthropic-version", "2023-06-01"}, {"content-type", "application/json"}};
  else
    call.headers = {{"authorization", std::string("Bearer ") + key}, {"content-type", "application/json"}};
  const uint64_t timeout_ns = static_cast<uint64_t>(config.timeout.count()) * 1'000'000ULL;
  return IntentFirewall::Judge([client = std::move(*client), url = std::move(*url), call, shape = *shape,
                                model = config.model,
                                timeout_ns](const IntentMission& m, const IntentAction& a) -> Result<IntentJudgement> {
    HttpCall c = call;
    c.body = intent_judge_request_body(shape, model, m, a);
    auto answer = client.call(url, c, timeout_ns);
    if (!answer) return answer.error();
    return read_intent_judge_answer(shape, answer->response.status.code, answer->response.body);
  });
}

}  // namespace faultline
