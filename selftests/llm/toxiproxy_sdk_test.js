// The official Anthropic SDK through a proxy made with the plain Toxiproxy API,
// faulted by adding toxics of the LLM types (llm_overloaded, llm_rate_limit),
// as an existing Toxiproxy test suite would: the SDK must raise the error
// class of the real service's answer, retry as often as that answer makes it,
// and first_n must let the retry through. A local stand-in plays the provider;
// nothing leaves 127.0.0.1. One "ok ..." line per check; exit 1 if any failed.
//
// With TLS, the same toxic on a proxy made with "listen_tls": the SDK speaks
// HTTPS to the proxy (trusting faultd's local CA through NODE_EXTRA_CA_CERTS,
// which the caller sets) and meets the toxic on the terminated plaintext.
//
//   node toxiproxy_sdk_test.js API_URL [tls]     (faultd's Toxiproxy API)
"use strict";
const http = require("node:http");
const Anthropic = require("@anthropic-ai/sdk");

const api = process.argv[2];
const withTls = process.argv[3] === "tls";
if (!api) {
  console.error("usage: node toxiproxy_sdk_test.js API_URL");
  process.exit(2);
}

let failures = 0;
function check(cond, what, detail) {
  if (!cond) {
    failures++;
    console.error(`FAILED: ${what}${detail === undefined ? "" : ": " + JSON.stringify(detail)}`);
    return false;
  }
  console.log(`ok ${what}`);
  return true;
}

let reached = 0; // requests that reached the stand-in
const standin = http.createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    reached++;
    res.writeHead(200, { "content-type": "application/json", "request-id": "req_standin" });
    res.end(
      JSON.stringify({
        id: "msg_standin",
        type: "message",
        role: "assistant",
        model: "claude-test",
        content: [{ type: "text", text: "Hello from the stand-in" }],
        stop_reason: "end_turn",
        stop_sequence: null,
        usage: { input_tokens: 3, output_tokens: 5 },
      }),
    );
  });
});
standin.keepAliveTimeout = 120000;

async function callApi(method, path, body) {
  const r = await fetch(api + path, {
    method,
    headers: { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

let attempts = 0; // attempts the SDK made (its fetch)
function countingFetch(url, init) {
  attempts++;
  return fetch(url, init);
}

async function ask(proxyAddr, maxRetries, scheme = "http") {
  attempts = 0;
  reached = 0;
  const c = new Anthropic.Anthropic({ apiKey: "sk-test", baseURL: `${scheme}://${proxyAddr}`, fetch: countingFetch, maxRetries, timeout: 10000 });
  try {
    return { value: await c.messages.create({ model: "claude-test", max_tokens: 16, messages: [{ role: "user", content: "hi" }] }) };
  } catch (error) {
    return { error };
  }
}

function name(e) {
  return e ? `${e.constructor.name} ${e.status ?? ""} ${String(e.message).slice(0, 120)}` : "no error";
}

async function main() {
  await new Promise((r) => standin.listen(0, "127.0.0.1", r));
  await fetch(api + "/proxies/llm_toxics", { method: "DELETE" });
  const proxy = await callApi("POST", "/proxies", {
    name: "llm_toxics",
    listen: "127.0.0.1:0",
    upstream: `127.0.0.1:${standin.address().port}`,
  });
  const addr = proxy.listen;

  // Overloaded on every request: OverloadedError 529 after maxRetries + 1 attempts.
  const t = await callApi("POST", "/proxies/llm_toxics/toxics", { type: "llm_overloaded", stream: "downstream", toxicity: 1.0, attributes: {} });
  check(t.name === "llm_overloaded_downstream" && t.type === "llm_overloaded", "the toxic in Toxiproxy's envelope", t);
  let r = await ask(addr, 2);
  check(r.error instanceof Anthropic.OverloadedError && r.error.status === 529, "llm_overloaded: OverloadedError 529", name(r.error));
  check(r.error && r.error.error && r.error.error.error && r.error.error.error.type === "overloaded_error",
    "llm_overloaded: the envelope's type is overloaded_error", r.error && r.error.error);
  check(attempts === 3 && reached === 0, "llm_overloaded: maxRetries 2 = 3 attempts, none reached the provider", { attempts, reached });

  // first_n 2: the SDK's first two attempts are overloaded, its second retry succeeds.
  await callApi("POST", "/proxies/llm_toxics/toxics/llm_overloaded_downstream", { attributes: { first_n: 2 } });
  r = await ask(addr, 2);
  check(!r.error && r.value.content[0].text === "Hello from the stand-in", "llm_overloaded first_n 2: the second retry succeeds", name(r.error));
  check(attempts === 3 && reached === 1, "llm_overloaded first_n 2: 3 attempts, only the last reached the provider", { attempts, reached });
  r = await ask(addr, 0);
  check(!r.error && attempts === 1, "llm_overloaded first_n 2: later requests pass", name(r.error));
  await callApi("DELETE", "/proxies/llm_toxics/toxics/llm_overloaded_downstream");

  // Rate limited: RateLimitError 429 with retry-after.
  await callApi("POST", "/proxies/llm_toxics/toxics", { name: "rl", type: "llm_rate_limit", attributes: { retry_after: 1, path: "/v1/messages" } });
  r = await ask(addr, 0);
  check(r.error instanceof Anthropic.RateLimitError && r.error.status === 429 && r.error.headers.get("retry-after") === "1",
    "llm_rate_limit: RateLimitError 429, retry-after 1", name(r.error));
  // toxicity 0: never applies.
  await callApi("POST", "/proxies/llm_toxics/toxics/rl", { toxicity: 0 });
  r = await ask(addr, 0);
  check(!r.error && reached === 1, "llm_rate_limit toxicity 0: the request passes", name(r.error));

  await callApi("DELETE", "/proxies/llm_toxics");

  if (withTls) {
    await fetch(api + "/proxies/llm_tls", { method: "DELETE" });
    const tlsProxy = await callApi("POST", "/proxies", {
      name: "llm_tls",
      listen: "127.0.0.1:0",
      upstream: `127.0.0.1:${standin.address().port}`,
      listen_tls: true,
    });
    check(tlsProxy.listen_tls === true, "a proxy made with listen_tls shows it", tlsProxy);
    r = await ask(tlsProxy.listen, 0, "https");
    check(!r.error && reached === 1, "over TLS: a clean request reaches the provider", name(r.error));
    await callApi("POST", "/proxies/llm_tls/toxics", { type: "llm_overloaded", attributes: { first_n: 1 } });
    r = await ask(tlsProxy.listen, 0, "https");
    check(r.error instanceof Anthropic.OverloadedError && r.error.status === 529 && reached === 0,
      "over TLS: llm_overloaded is OverloadedError 529, nothing reached the provider", name(r.error));
    r = await ask(tlsProxy.listen, 0, "https");
    check(!r.error && reached === 1, "over TLS: first_n 1, the next request passes", name(r.error));
    await callApi("DELETE", "/proxies/llm_tls");
  }
  standin.close();
  console.log(failures === 0 ? "all passed" : `${failures} checks failed`);
  process.exit(failures === 0 ? 0 : 1);
}

main().catch((e) => {
  console.error(e && e.stack);
  process.exit(1);
});
