// The LLM presets of faultd's HTTP faults, proven with the official SDKs
// (@anthropic-ai/sdk, openai) as an agent would use them: a local stand-in
// provider that speaks both APIs (streaming and not) sits behind a faultd
// proxy; each preset must raise the SDK's error class for it, be retried
// exactly as often as the real service's answer makes the SDK retry, have its
// retry-after honoured, and a stream cut must surface as the SDK's stream
// error. Attempts are counted twice: at the SDK's fetch and at the stand-in.
// Nothing leaves 127.0.0.1. Prints one "ok ..." line per check; exits 1 if any
// check failed (every case still runs).
//
//   node sdk_test.js API_URL        (faultd's Toxiproxy API, e.g. http://127.0.0.1:8474)
"use strict";
const http = require("node:http");
const Anthropic = require("@anthropic-ai/sdk");
const OpenAI = require("openai");

const api = process.argv[2];
if (!api) {
  console.error("usage: node sdk_test.js API_URL");
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

// --- the stand-in provider --------------------------------------------------

const seen = []; // {path, retry, stream} per request that reached it

function sse(res, events) {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  let i = 0;
  const next = () => {
    if (i === events.length) return res.end();
    res.write(events[i++]);
    setTimeout(next, 2);
  };
  next();
}

function anthropicMessage(res, stream) {
  const msg = {
    id: "msg_standin",
    type: "message",
    role: "assistant",
    model: "claude-test",
    content: [{ type: "text", text: "Hello from the stand-in" }],
    stop_reason: "end_turn",
    stop_sequence: null,
    usage: { input_tokens: 3, output_tokens: 5 },
  };
  if (!stream) {
    res.writeHead(200, { "content-type": "application/json", "request-id": "req_standin" });
    return res.end(JSON.stringify(msg));
  }
  const ev = (name, data) => `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`;
  sse(res, [
    ev("message_start", { type: "message_start", message: { ...msg, content: [], stop_reason: null, usage: { input_tokens: 3, output_tokens: 0 } } }),
    ev("content_block_start", { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }),
    ev("ping", { type: "ping" }),
    ev("content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "Hello" } }),
    ev("content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: " from" } }),
    ev("content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: " the stand-in" } }),
    ev("content_block_stop", { type: "content_block_stop", index: 0 }),
    ev("message_delta", { type: "message_delta", delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { output_tokens: 5 } }),
    ev("message_stop", { type: "message_stop" }),
  ]);
}

function openaiCompletion(res, stream) {
  const base = { id: "chatcmpl-standin", created: 1764650000, model: "gpt-test", system_fingerprint: null };
  if (!stream) {
    res.writeHead(200, { "content-type": "application/json", "x-request-id": "req_standin" });
    return res.end(
      JSON.stringify({
        ...base,
        object: "chat.completion",
        choices: [{ index: 0, message: { role: "assistant", content: "Hello from the stand-in" }, finish_reason: "stop", logprobs: null }],
        usage: { prompt_tokens: 3, completion_tokens: 5, total_tokens: 8 },
      }),
    );
  }
  const chunk = (delta, finish) =>
    `data: ${JSON.stringify({ ...base, object: "chat.completion.chunk", choices: [{ index: 0, delta, finish_reason: finish, logprobs: null }] })}\n\n`;
  sse(res, [
    chunk({ role: "assistant", content: "" }, null),
    chunk({ content: "Hello" }, null),
    chunk({ content: " from" }, null),
    chunk({ content: " the stand-in" }, null),
    chunk({}, "stop"),
    "data: [DONE]\n\n",
  ]);
}

const standin = http.createServer((req, res) => {
  let body = "";
  req.on("data", (c) => (body += c));
  req.on("end", () => {
    let j = {};
    try {
      j = JSON.parse(body || "{}");
    } catch (e) {}
    seen.push({ path: req.url, retry: req.headers["x-stainless-retry-count"], stream: !!j.stream });
    if (req.url.startsWith("/v1/messages")) return anthropicMessage(res, !!j.stream);
    if (req.url.startsWith("/v1/chat/completions")) return openaiCompletion(res, !!j.stream);
    res.writeHead(404, { "content-type": "application/json" });
    res.end('{"error":"not found"}');
  });
});
// The relay keeps one upstream connection per client connection: an idle
// keep-alive must outlive a test's pauses (node's default is 5 s).
standin.keepAliveTimeout = 120000;

// --- faultd -----------------------------------------------------------------

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

async function withFault(fault, fn) {
  const made = await callApi("POST", "/proxies/llm/http_faults", fault);
  try {
    return await fn(made);
  } finally {
    await callApi("DELETE", `/proxies/llm/http_faults/${made.name}`);
  }
}

// --- the SDKs ---------------------------------------------------------------

let proxyAddr = "";
let calls = []; // {t, retry} per attempt the SDK made (its fetch)

function countingFetch(url, init) {
  const h = new Headers(init && init.headers);
  calls.push({ t: Date.now(), retry: h.get("x-stainless-retry-count") });
  return fetch(url, init);
}

function client(provider, opts) {
  const common = { apiKey: "sk-test", fetch: countingFetch, maxRetries: 2, timeout: 10000, ...opts };
  return provider === "anthropic"
    ? new Anthropic.Anthropic({ ...common, baseURL: `http://${proxyAddr}` })
    : new OpenAI.OpenAI({ ...common, baseURL: `http://${proxyAddr}/v1` });
}

function ask(provider, opts = {}, stream = false) {
  const c = client(provider, opts);
  return provider === "anthropic"
    ? c.messages.create({ model: "claude-test", max_tokens: 16, messages: [{ role: "user", content: "hi" }], stream })
    : c.chat.completions.create({ model: "gpt-test", messages: [{ role: "user", content: "hi" }], stream });
}

function sdk(provider) {
  return provider === "anthropic" ? Anthropic : OpenAI;
}

async function attempt(fn) {
  calls = [];
  seen.length = 0;
  const start = Date.now();
  try {
    const value = await fn();
    return { value, ms: Date.now() - start };
  } catch (error) {
    return { error, ms: Date.now() - start };
  }
}

function gaps() {
  const g = [];
  for (let i = 1; i < calls.length; i++) g.push(calls[i].t - calls[i - 1].t);
  return g;
}

function name(e) {
  return e ? `${e.constructor.name} ${e.status ?? ""} ${String(e.message).slice(0, 120)}` : "no error";
}

// --- the cases ----------------------------------------------------------------

async function cleanPasses(provider) {
  const r = await attempt(() => ask(provider));
  check(!r.error && calls.length === 1 && seen.length === 1, `${provider}: a clean request reaches the stand-in once`, name(r.error));
}

async function overloaded(provider) {
  const S = sdk(provider);
  await withFault({ type: "llm", attributes: { preset: "overloaded" } }, async () => {
    const r = await attempt(() => ask(provider, { maxRetries: 2 }));
    const e = r.error;
    if (provider === "anthropic") {
      check(e instanceof S.OverloadedError && e.status === 529, "anthropic overloaded: OverloadedError 529", name(e));
      check(e.error && e.error.error && e.error.error.type === "overloaded_error" && e.error.request_id === e.headers.get("request-id"),
        "anthropic overloaded: the envelope's type and request_id (= the request-id header)", e && e.error);
      check(e.headers.get("x-should-retry") === "true", "anthropic overloaded: x-should-retry: true");
    } else {
      check(e instanceof S.InternalServerError && e.status === 503, "openai overloaded: InternalServerError 503", name(e));
      check(e.code === "server_is_overloaded" && e.type === "service_unavailable_error" && /^req_[0-9a-f]{32}$/.test(e.requestID || ""),
        "openai overloaded: code server_is_overloaded, x-request-id", { code: e.code, type: e.type, id: e.requestID });
    }
    check(calls.length === 3 && seen.length === 0, `${provider} overloaded: maxRetries 2 = 3 attempts, none reached the provider`,
      { attempts: calls.length, reached: seen.length });
  });
}

async function rateLimit(provider) {
  const S = sdk(provider);
  await withFault({ type: "llm", attributes: { preset: "rate-limit", retry_after: 1 } }, async () => {
    const r = await attempt(() => ask(provider, { maxRetries: 0 }));
    const e = r.error;
    check(e instanceof S.RateLimitError && e.status === 429, `${provider} rate-limit: RateLimitError 429`, name(e));
    check(e.headers.get("retry-after") === "1", `${provider} rate-limit: retry-after: 1`);
    if (provider === "anthropic") {
      const reset = e.headers.get("anthropic-ratelimit-requests-reset") || "";
      check(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/.test(reset) && Math.abs(Date.parse(reset) - Date.now()) < 5000,
        "anthropic rate-limit: anthropic-ratelimit-requests-reset is RFC 3339, a second ahead", reset);
      check(e.error.error.type === "rate_limit_error" && e.headers.get("anthropic-ratelimit-requests-remaining") === "0",
        "anthropic rate-limit: rate_limit_error, requests-remaining 0");
    } else {
      check(e.headers.get("x-ratelimit-reset-requests") === "1s" && e.headers.get("x-ratelimit-remaining-requests") === "0",
        "openai rate-limit: x-ratelimit-reset-requests 1s (a duration), remaining 0");
      check(e.code === "rate_limit_exceeded", "openai rate-limit: code rate_limit_exceeded", e.code);
    }
    check(calls.length === 1, `${provider} rate-limit: maxRetries 0 = 1 attempt`, calls.length);
  });
  // attempts 1: the first attempt is refused, the retry (x-stainless-retry-count 1)
  // goes through, after the retry-after the answer asked for.
  await withFault({ type: "llm", attempts: 1, attributes: { preset: "rate-limit", retry_after: 1 } }, async () => {
    const r = await attempt(() => ask(provider, { maxRetries: 2 }));
    check(!r.error, `${provider} rate-limit attempts 1: the retry succeeds`, name(r.error));
    check(calls.length === 2 && seen.length === 1 && seen[0].retry === "1",
      `${provider} rate-limit attempts 1: 2 attempts, the stand-in saw only the retry (retry-count 1)`, { calls, seen });
    check(gaps()[0] >= 950 && gaps()[0] < 3000, `${provider} rate-limit: the retry waited retry-after (1 s)`, gaps());
  });
}

async function serverError(provider) {
  const S = sdk(provider);
  await withFault({ type: "llm", attributes: { preset: "server-error" } }, async () => {
    const r = await attempt(() => ask(provider, { maxRetries: 0 }));
    check(r.error instanceof S.InternalServerError && r.error.status === 500, `${provider} server-error: InternalServerError 500`, name(r.error));
  });
  await withFault({ type: "llm", attempts: 2, attributes: { preset: "server-error" } }, async () => {
    const r = await attempt(() => ask(provider, { maxRetries: 2 }));
    check(!r.error && calls.length === 3 && seen.length === 1 && seen[0].retry === "2",
      `${provider} server-error attempts 2: recovers on the second retry`, { err: name(r.error), calls: calls.length, seen });
  });
}

async function badGateway(provider) {
  const S = sdk(provider);
  await withFault({ type: "llm", attributes: { preset: "bad-gateway" } }, async () => {
    const r = await attempt(() => ask(provider, { maxRetries: 1 }));
    check(r.error instanceof S.InternalServerError && r.error.status === 502 && /502 Bad Gateway/.test(r.error.message),
      `${provider} bad-gateway: InternalServerError 502 with the HTML page`, name(r.error));
    check(calls.length === 2, `${provider} bad-gateway: maxRetries 1 = 2 attempts`, calls.length);
  });
}

async function timeout(provider) {
  const S = sdk(provider);
  await withFault({ type: "llm", attributes: { preset: "timeout", hang: 300 } }, async () => {
    const r = await attempt(() => ask(provider, { maxRetries: 0 }));
    const want = provider === "anthropic" ? S.GatewayTimeoutError : S.InternalServerError;
    check(r.error instanceof want && r.error.status === 504 && r.ms >= 290,
      `${provider} timeout: ${want.name} 504 after the hang`, { err: name(r.error), ms: r.ms });
  });
  await withFault({ type: "llm", attributes: { preset: "timeout", hang: 5000 } }, async () => {
    const r = await attempt(() => ask(provider, { maxRetries: 1, timeout: 200 }));
    check(r.error instanceof S.APIConnectionTimeoutError && calls.length === 2,
      `${provider} timeout: a hang past the SDK's timeout is APIConnectionTimeoutError, retried once`, { err: name(r.error), calls: calls.length });
  });
}

async function streamCut(provider) {
  await withFault({ type: "llm", attributes: { preset: "stream-cut", events: 3 } }, async () => {
    let got = 0;
    const r = await attempt(async () => {
      const stream = await ask(provider, { maxRetries: 2 }, true);
      for await (const ev of stream) got++;
    });
    // The cut comes after 3 events on the wire. OpenAI's SDK yields each data:
    // chunk (3); Anthropic's yields message_start and content_block_start and
    // drops the ping (2).
    const want = provider === "anthropic" ? 2 : 3;
    check(got === want, `${provider} stream-cut: the ${want} events before the cut arrive whole`, got);
    // Both SDKs let fetch's (undici's) error through: TypeError "terminated",
    // caused by "other side closed".
    check(r.error instanceof TypeError && r.error.message === "terminated",
      `${provider} stream-cut: the iteration throws fetch's TypeError: terminated`, name(r.error));
    console.log(`   (${provider} stream error: ${name(r.error)}${r.error && r.error.cause ? "; cause: " + r.error.cause : ""})`);
    check(calls.length === 1 && seen.length === 1, `${provider} stream-cut: the stream is not retried (1 attempt)`, calls.length);
  });
}

// An error preset on a streaming request: the SDK raises (or retries) before the
// stream starts; attempts 1 recovers and the whole stream arrives.
async function streamRetried(provider) {
  await withFault({ type: "llm", attempts: 1, attributes: { preset: "overloaded" } }, async () => {
    let got = 0;
    const r = await attempt(async () => {
      const stream = await ask(provider, { maxRetries: 2 }, true);
      for await (const ev of stream) got++;
    });
    const want = provider === "anthropic" ? 8 : 5; // Anthropic: 9 events less the ping; OpenAI: 5 chunks before [DONE]
    check(!r.error && got === want && calls.length === 2 && seen.length === 1 && seen[0].stream,
      `${provider} overloaded on a stream, attempts 1: retried once, then the whole stream (${want} events)`,
      { err: name(r.error), got, calls: calls.length, seen });
  });
}

async function percent(provider) {
  await withFault({ type: "llm", percent: 50, attributes: { preset: "server-error" } }, async () => {
    let failed = 0;
    for (let i = 0; i < 40; i++) {
      const r = await attempt(() => ask(provider, { maxRetries: 0 }));
      if (r.error) failed++;
    }
    check(failed > 8 && failed < 32, `${provider} percent 50: some requests fail, some pass`, failed);
  });
}

async function main() {
  await new Promise((r) => standin.listen(0, "127.0.0.1", r));
  const upstream = `127.0.0.1:${standin.address().port}`;
  await fetch(api + "/proxies/llm", { method: "DELETE" });
  const proxy = await callApi("POST", "/proxies", { name: "llm", listen: "127.0.0.1:0", upstream });
  proxyAddr = proxy.listen;
  // HTTP mode from the start (a first fault, matched by nothing), so every
  // connection the SDKs open is parsed.
  await callApi("POST", "/proxies/llm/http_faults", { name: "mode", type: "status", match: { path: "/nothing-here" }, attributes: { status: 500 } });
  for (const provider of ["anthropic", "openai"]) {
    for (const c of [cleanPasses, overloaded, rateLimit, serverError, badGateway, timeout, streamCut, streamRetried, percent]) {
      try {
        await c(provider);
      } catch (e) {
        check(false, `${provider} ${c.name} threw`, String(e && e.stack));
      }
    }
  }
  // The provider is taken from the fault when given: an OpenAI envelope on the Anthropic route.
  await withFault({ type: "llm", attributes: { preset: "overloaded", provider: "openai" } }, async () => {
    const r = await attempt(() => ask("anthropic", { maxRetries: 0 }));
    check(r.error && r.error.status === 503, "provider given: openai's 503 even for an Anthropic client", name(r.error));
  });
  await callApi("DELETE", "/proxies/llm");
  standin.close();
  console.log(failures === 0 ? "all passed" : `${failures} checks failed`);
  process.exit(failures === 0 ? 0 : 1);
}

main().catch((e) => {
  console.error(e && e.stack);
  process.exit(1);
});
