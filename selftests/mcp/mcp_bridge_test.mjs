// faultctl mcp-guard as a bridge: the agent on stdio and the server over HTTP
// (--upstream-url: the pinned server-everything in its Streamable HTTP and
// SSE modes), and the agent over Streamable HTTP (--listen, the SDK's HTTP
// client) with the server on the guard's stdio. The same rules, pins and
// activity log as the stdio guard. Loopback only; every process and folder
// a test makes is gone at its end.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { Client, EVERYTHING, FAULTCTL, StdioClientTransport, connectFaultctl, here, text, until } from "./harness.mjs";

const { StreamableHTTPClientTransport } = await import("@modelcontextprotocol/sdk/client/streamableHttp.js");
const { LoggingMessageNotificationSchema } = await import("@modelcontextprotocol/sdk/types.js");

function tempWorld(t) {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "fl-mcpb-"));
  const w = { root, state: path.join(root, "state"), run: path.join(root, "run"), log: path.join(root, "activity.jsonl") };
  fs.mkdirSync(w.run, { mode: 0o700 });
  w.env = { ...process.env, XDG_RUNTIME_DIR: w.run };
  t.after(() => fs.rmSync(root, { recursive: true, force: true }));
  return w;
}

async function freePort() {
  const s = net.createServer();
  await new Promise((r) => s.listen(0, "127.0.0.1", r));
  const { port } = s.address();
  await new Promise((r) => s.close(r));
  return port;
}

// server-everything in an HTTP mode on a port of its own, stopped at the end.
async function everythingHttp(t, mode) {
  const port = await freePort();
  const child = spawn(process.execPath, [EVERYTHING, mode], {
    env: { ...process.env, PORT: String(port) },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (out += d));
  t.after(() => child.kill("SIGKILL"));
  await until(`server-everything ${mode} on ${port}`, () => /listening|running/i.test(out));
  return { port, child };
}

// A recording HTTP relay in front of a server: what headers reached it.
async function recordingRelay(t, port) {
  const seen = [];
  const relay = http.createServer((req, res) => {
    seen.push({ method: req.method, headers: req.headers });
    const up = http.request({ host: "127.0.0.1", port, method: req.method, path: req.url, headers: req.headers }, (r) => {
      res.writeHead(r.statusCode, r.headers);
      r.pipe(res);
    });
    up.on("error", () => res.destroy());
    req.pipe(up);
  });
  await new Promise((r) => relay.listen(0, "127.0.0.1", r));
  t.after(() => {
    relay.closeAllConnections();
    relay.close();
  });
  return { port: relay.address().port, seen };
}

// An SDK client on stdio through `faultctl mcp-guard FLAGS` (no command: --upstream-url).
function stdioClient(t, w, flags, env = {}) {
  return connectFaultctl(t, { ...w.env, ...env }, ["mcp-guard", "--state-dir", w.state, "--json-log", w.log, ...flags]);
}

function verdicts(w) {
  return fs
    .readFileSync(w.log, "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l))
    .map((l) => [l.host, l.path, l.verdict]);
}

test("--upstream-url over Streamable HTTP: rules apply, the header's secret reaches the server and no log", async (t) => {
  const w = tempWorld(t);
  const srv = await everythingHttp(t, "streamableHttp");
  const relay = await recordingRelay(t, srv.port);
  const secret = "s3cr3t-" + Math.random().toString(36).slice(2);
  const s = await stdioClient(
    t,
    w,
    [
      "--enforce",
      "--deny-tool",
      "get-sum",
      "--server-name",
      "everything",
      "--upstream-url",
      `http://127.0.0.1:${relay.port}/mcp`,
      "--upstream-header",
      "Authorization: Bearer ${FL_TEST_TOKEN}",
    ],
    { FL_TEST_TOKEN: secret },
  );
  const tools = await s.client.listTools();
  assert.ok(tools.tools.some((x) => x.name === "echo"), "server-everything's tools came through");
  const echo = await s.client.callTool({ name: "echo", arguments: { message: "over http" } });
  assert.equal(text(echo), "Echo: over http");
  const denied = await s.client.callTool({ name: "get-sum", arguments: { a: 1, b: 2 } });
  assert.equal(denied.isError, true);
  assert.equal(text(denied), "blocked by faultline: --deny-tool get-sum: denied by rule");
  // Every request carried the header, the session's id after initialize.
  const posts = relay.seen.filter((r) => r.method === "POST");
  assert.ok(posts.length >= 4, `POSTs seen: ${posts.length}`);
  for (const p of posts) assert.equal(p.headers.authorization, `Bearer ${secret}`);
  assert.ok(posts.slice(1).every((p) => p.headers["mcp-session-id"]), "the session id after initialize");
  await s.client.close();
  await until("the session's DELETE", () => relay.seen.some((r) => r.method === "DELETE"));
  assert.doesNotMatch(s.stderr(), new RegExp(secret));
  assert.doesNotMatch(fs.readFileSync(w.log, "utf8"), new RegExp(secret));
  assert.deepEqual(verdicts(w), [
    ["everything", "echo", "allow"],
    ["everything", "get-sum", "deny"],
  ]);
  assert.match(s.stderr(), /over Streamable HTTP, 1 header\(s\) of yours/);
});

test("--upstream-url --upstream-transport sse: the older transport, the same rules", async (t) => {
  const w = tempWorld(t);
  const srv = await everythingHttp(t, "sse");
  const s = await stdioClient(t, w, [
    "--enforce",
    "--deny-tool",
    "get-sum",
    "--upstream-url",
    `http://127.0.0.1:${srv.port}/sse`,
    "--upstream-transport",
    "sse",
  ]);
  const echo = await s.client.callTool({ name: "echo", arguments: { message: "over sse" } });
  assert.equal(text(echo), "Echo: over sse");
  const denied = await s.client.callTool({ name: "get-sum", arguments: { a: 1, b: 2 } });
  assert.equal(text(denied), "blocked by faultline: --deny-tool get-sum: denied by rule");
  // The name from the URL: host and port.
  assert.deepEqual(verdicts(w), [
    [`127.0.0.1_${srv.port}`, "echo", "allow"],
    [`127.0.0.1_${srv.port}`, "get-sum", "deny"],
  ]);
});

test("an upstream that is not there: the SSE start fails by name; Streamable HTTP answers the call with an error", async (t) => {
  const w = tempWorld(t);
  const port = await freePort();
  let r;
  try {
    execFileSync(FAULTCTL, ["mcp-guard", "--state-dir", w.state, "--upstream-url", `http://127.0.0.1:${port}/sse`,
      "--upstream-transport", "sse"], { env: w.env, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  } catch (e) {
    r = e;
  }
  assert.equal(r.status, 1);
  assert.match(r.stderr, /the SSE stream failed: .*(refused|Couldn't connect)/i);
  const s = new StdioClientTransport({
    command: FAULTCTL,
    args: ["mcp-guard", "--state-dir", w.state, "--upstream-url", `http://127.0.0.1:${port}/mcp`],
    env: w.env,
    stderr: "pipe",
  });
  const client = new Client({ name: "faultline-test", version: "1.0.0" });
  t.after(() => client.close());
  await assert.rejects(client.connect(s), /faultline mcp-guard: the upstream could not be reached/);
});

// The guard with --listen, the server on its stdio; the address from its banner.
async function listening(t, w, flags, server) {
  const command = server.length > 0 ? ["--", ...server] : [];
  const guard = spawn(FAULTCTL, ["mcp-guard", "--state-dir", w.state, "--json-log", w.log, "--listen", "127.0.0.1:0", ...flags, ...command], {
    env: w.env,
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  guard.stderr.on("data", (d) => (stderr += d));
  const exited = new Promise((r) => guard.on("exit", (code) => r(code)));
  t.after(async () => {
    guard.kill("SIGTERM");
    await exited;
  });
  const url = (await until("the guard's address", () => stderr.match(/clients at (http:\/\/\S+\/mcp)/)))[1];
  return { guard, url, stderr: () => stderr, exited };
}

test("--listen: the SDK's Streamable HTTP client through the guard to a stdio server; its notifications on the GET stream", async (t) => {
  const w = tempWorld(t);
  const g = await listening(t, w, ["--enforce", "--deny-tool", "get-sum", "--server-name", "everything"], [
    process.execPath,
    EVERYTHING,
    "stdio",
  ]);
  const client = new Client({ name: "faultline-test", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(g.url));
  await client.connect(transport);
  t.after(() => client.close());
  assert.ok(transport.sessionId, "the guard gave a session id");
  const echo = await client.callTool({ name: "echo", arguments: { message: "over listen" } });
  assert.equal(text(echo), "Echo: over listen");
  const denied = await client.callTool({ name: "get-sum", arguments: { a: 1, b: 2 } });
  assert.equal(text(denied), "blocked by faultline: --deny-tool get-sum: denied by rule");
  // The server's own messages (log notifications) reach the client on the GET stream.
  const logs = [];
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => logs.push(n));
  await client.setLoggingLevel("debug");
  await client.callTool({ name: "toggle-simulated-logging", arguments: {} });
  await until("a log notification", () => logs.length > 0, 30000);

  // Bad input over HTTP: not JSON is -32700 and the session goes on; over 10 MiB is 413; a foreign Origin 403.
  const headers = { "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-session-id": transport.sessionId };
  const notJson = await fetch(g.url, { method: "POST", headers, body: "{not json" });
  assert.equal(notJson.status, 400);
  assert.equal((await notJson.json()).error.code, -32700);
  const big = await fetch(g.url, { method: "POST", headers, body: "[" + "1,".repeat(5.5 * 1024 * 1024) + "1]" });
  assert.equal(big.status, 413);
  const foreign = await fetch(g.url, { method: "POST", headers: { ...headers, origin: "http://evil.example" }, body: "{}" });
  assert.equal(foreign.status, 403);
  const wrongSession = await fetch(g.url, { method: "POST", headers: { ...headers, "mcp-session-id": "nope" }, body: JSON.stringify({ jsonrpc: "2.0", id: 99, method: "tools/list" }) });
  assert.equal(wrongSession.status, 404);
  const bigHead = await fetch(g.url, { method: "POST", headers: { ...headers, "x-filler": "a".repeat(20000) }, body: "{}" });
  assert.equal(bigHead.status, 431);
  const again = await client.callTool({ name: "echo", arguments: { message: "still here" } });
  assert.equal(text(again), "Echo: still here");
  await client.close();
  // SIGTERM goes on to the server; the guard exits with the server's code (143: SIGTERM).
  g.guard.kill("SIGTERM");
  assert.equal(await g.exited, 143);
  assert.match(g.stderr(), /a POST body that is not JSON: answered -32700/);
  const v = verdicts(w).filter((x) => x[1] !== "toggle-simulated-logging");
  assert.deepEqual(v, [
    ["everything", "echo", "allow"],
    ["everything", "get-sum", "deny"],
    ["everything", "echo", "allow"],
  ]);
});

test("--listen with --upstream-url: HTTP on both sides, the rules in the middle", async (t) => {
  const w = tempWorld(t);
  const srv = await everythingHttp(t, "streamableHttp");
  const g = await listening(t, w, ["--enforce", "--deny-tool", "get-sum", "--upstream-url", `http://127.0.0.1:${srv.port}/mcp`], []);
  const client = new Client({ name: "faultline-test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(g.url)));
  t.after(() => client.close());
  assert.equal(text(await client.callTool({ name: "echo", arguments: { message: "both" } })), "Echo: both");
  const denied = await client.callTool({ name: "get-sum", arguments: { a: 1, b: 2 } });
  assert.equal(denied.isError, true);
  // A long call's progress notifications come from the upstream's answer stream to our GET stream.
  const progress = [];
  const r = await client.callTool({ name: "trigger-long-running-operation", arguments: { duration: 1, steps: 2 } }, undefined, {
    onprogress: (p) => progress.push(p),
  });
  assert.notEqual(r.isError, true);
  assert.ok(progress.length >= 1, "progress notifications reached the client");
  await client.close();
  g.guard.kill("SIGTERM");
  assert.equal(await g.exited, 0, "a remote session ends at SIGTERM with 0");
});

test("--listen refuses an address that is not loopback without --allow-remote; bad bridge flags name the flag", () => {
  const run = (args, env = {}) => {
    try {
      execFileSync(FAULTCTL, ["mcp-guard", ...args], { env: { ...process.env, ...env }, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
      return { status: 0, stderr: "" };
    } catch (e) {
      return { status: e.status, stderr: e.stderr };
    }
  };
  const state = fs.mkdtempSync(path.join(os.tmpdir(), "fl-mcpb-state-"));
  let r = run(["--state-dir", state, "--listen", "0.0.0.0:0", "--", "true"]);
  fs.rmSync(state, { recursive: true, force: true });
  assert.equal(r.status, 2);
  assert.match(r.stderr, /--listen 0\.0\.0\.0:0: not a loopback address/);
  r = run(["--upstream-url", "http://127.0.0.1:1/mcp", "--upstream-header", "Authorization: Bearer ${FL_UNSET_VAR_X}"]);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /--upstream-header Authorization: the variable FL_UNSET_VAR_X is not set/);
  r = run(["--upstream-url", "ftp://x/mcp"]);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /--upstream-url 'ftp:\/\/x\/mcp': an http:\/\/ or https:\/\/ URL/);
  r = run(["--upstream-url", "http://127.0.0.1:1/mcp", "--", "node", "x.js"]);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /give one/);
  r = run(["--upstream-transport", "sse", "--", "true"]);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /--upstream-transport goes with --upstream-url/);
});
