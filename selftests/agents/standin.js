// A local stand-in model server for the real agent CLIs: Anthropic's Messages
// API (what Claude Code calls) or OpenAI's Responses API (what Codex calls),
// both streamed as SSE the way the real services stream them, on 127.0.0.1 at a
// port the kernel picks. It never reaches the internet. Every request is
// recorded (method, path, the headers, a hash of the body) as one JSON line in
// LOG, so a test can count the attempts that reached it.
//
//   node standin.js anthropic|openai LOG [TEXT]
// Prints "listening PORT" once it accepts connections. With STANDIN_TLS_CERT
// and STANDIN_TLS_KEY (PEM files) set it speaks HTTPS instead.
"use strict";
const http = require("node:http");
const https = require("node:https");
const crypto = require("node:crypto");
const fs = require("node:fs");

const [provider, logPath, answerText = "Hello from the stand-in"] = process.argv.slice(2);
if (!["anthropic", "openai"].includes(provider) || !logPath) {
  console.error("usage: node standin.js anthropic|openai LOG [TEXT]");
  process.exit(2);
}

function record(req, body) {
  const line = {
    method: req.method,
    path: req.url,
    headers: req.headers,
    body_sha256: crypto.createHash("sha256").update(body).digest("hex"),
    body_bytes: body.length,
    model: null,
    stream: null,
  };
  try {
    const j = JSON.parse(body.toString("utf8"));
    line.model = j.model ?? null;
    line.stream = j.stream ?? null;
  } catch {}
  fs.appendFileSync(logPath, JSON.stringify(line) + "\n");
}

function sse(res, events) {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  for (const [event, data] of events) res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  res.end();
}

function json(res, status, body) {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}

// Messages: the event sequence of a one-block text answer; usage cumulative in
// message_delta, as the real service sends it.
function anthropic(req, res, body) {
  if (req.method === "POST" && req.url.startsWith("/v1/messages/count_tokens"))
    return json(res, 200, { input_tokens: 7 });
  if (req.method !== "POST" || !req.url.startsWith("/v1/messages"))
    return json(res, 404, { type: "error", error: { type: "not_found_error", message: "stand-in: no " + req.url } });
  let model = "claude-standin";
  let stream = false;
  try {
    const j = JSON.parse(body.toString("utf8"));
    model = j.model || model;
    stream = j.stream === true;
  } catch {}
  const id = "msg_standin_" + crypto.randomBytes(6).toString("hex");
  const usage = { input_tokens: 7, output_tokens: 5, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };
  if (!stream)
    return json(res, 200, {
      id, type: "message", role: "assistant", model,
      content: [{ type: "text", text: answerText }],
      stop_reason: "end_turn", stop_sequence: null, usage,
    });
  sse(res, [
    ["message_start", { type: "message_start", message: {
      id, type: "message", role: "assistant", model, content: [], stop_reason: null, stop_sequence: null,
      usage: { ...usage, output_tokens: 1 } } }],
    ["content_block_start", { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }],
    ["ping", { type: "ping" }],
    ["content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: answerText } }],
    ["content_block_stop", { type: "content_block_stop", index: 0 }],
    ["message_delta", { type: "message_delta", delta: { stop_reason: "end_turn", stop_sequence: null },
      usage: { output_tokens: 5 } }],
    ["message_stop", { type: "message_stop" }],
  ]);
}

// Responses: created, the message item and its text, completed (the terminal
// event carries the whole response and its usage).
function openai(req, res, body) {
  if (req.method !== "POST" || !req.url.startsWith("/v1/responses"))
    return json(res, 404, { error: { type: "invalid_request_error", message: "stand-in: no " + req.url } });
  let model = "gpt-standin";
  try {
    model = JSON.parse(body.toString("utf8")).model || model;
  } catch {}
  const id = "resp_standin_" + crypto.randomBytes(6).toString("hex");
  const itemId = "msg_standin_" + crypto.randomBytes(6).toString("hex");
  const part = { type: "output_text", text: answerText, annotations: [] };
  const item = { id: itemId, type: "message", status: "completed", role: "assistant", content: [part] };
  const base = { id, object: "response", created_at: Math.floor(Date.now() / 1000), model, output: [] };
  const usage = { input_tokens: 7, input_tokens_details: { cached_tokens: 0 }, output_tokens: 5,
    output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 12 };
  let seq = 0;
  const ev = (type, data) => [type, { type, sequence_number: seq++, ...data }];
  sse(res, [
    ev("response.created", { response: { ...base, status: "in_progress" } }),
    ev("response.in_progress", { response: { ...base, status: "in_progress" } }),
    ev("response.output_item.added", { output_index: 0, item: { ...item, status: "in_progress", content: [] } }),
    ev("response.content_part.added", { item_id: itemId, output_index: 0, content_index: 0,
      part: { ...part, text: "" } }),
    ev("response.output_text.delta", { item_id: itemId, output_index: 0, content_index: 0, delta: answerText }),
    ev("response.output_text.done", { item_id: itemId, output_index: 0, content_index: 0, text: answerText }),
    ev("response.content_part.done", { item_id: itemId, output_index: 0, content_index: 0, part }),
    ev("response.output_item.done", { output_index: 0, item }),
    ev("response.completed", { response: { ...base, status: "completed", output: [item], usage } }),
  ]);
}

const tls = process.env.STANDIN_TLS_CERT
  ? { cert: fs.readFileSync(process.env.STANDIN_TLS_CERT), key: fs.readFileSync(process.env.STANDIN_TLS_KEY) }
  : null;
const handler = (req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const body = Buffer.concat(chunks);
    record(req, body);
    (provider === "anthropic" ? anthropic : openai)(req, res, body);
  });
};
const server = tls ? https.createServer(tls, handler) : http.createServer(handler);
server.keepAliveTimeout = 30_000;
server.listen(0, "127.0.0.1", () => console.log(`listening ${server.address().port}`));
process.on("SIGTERM", () => process.exit(0));
