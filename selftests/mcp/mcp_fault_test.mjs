// faultctl mcp-guard's fault proxy and trace, with the SDK's client and the
// pinned server-everything on stdio: an error or a delay instead of the
// call; the kill file and FAULTLINE_DISABLED end faults (never the gate's
// rules); --trace redacts what it writes.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { EVERYTHING, FAULTCTL, connectFaultctl, text } from "./harness.mjs";


function world(t) {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "fl-mcpf-"));
  const w = { root, state: path.join(root, "state"), run: path.join(root, "run"), kill: path.join(root, "kill") };
  fs.mkdirSync(w.run, { mode: 0o700 });
  w.env = { ...process.env, XDG_RUNTIME_DIR: w.run, FAULTLINE_KILL_FILE: w.kill };
  delete w.env.FAULTLINE_DISABLED;
  t.after(() => fs.rmSync(root, { recursive: true, force: true }));
  return w;
}

function connect(t, w, flags, env = {}) {
  return connectFaultctl(t, { ...w.env, ...env },
    ["mcp-guard", "--state-dir", w.state, ...flags, "--", process.execPath, EVERYTHING, "stdio"]);
}

const echo = (s, m, opts) => s.client.callTool({ name: "echo", arguments: { message: m } }, undefined, opts);

test("--fault-error answers the call isError, unsent; the kill file ends it, the deny rule stays", async (t) => {
  const w = world(t);
  const s = await connect(t, w, ["--enforce", "--deny-tool", "get-sum", "--fault-tool", "ech?", "--fault-error", "injected by the test"]);
  const faulted = await echo(s, "a");
  assert.equal(faulted.isError, true);
  assert.equal(text(faulted), "injected by the test");
  fs.writeFileSync(w.kill, "stop\n");
  const plain = await echo(s, "b");
  assert.equal(text(plain), "Echo: b");
  const denied = await s.client.callTool({ name: "get-sum", arguments: { a: 1, b: 2 } });
  assert.equal(text(denied), "blocked by faultline: --deny-tool get-sum: denied by rule", "the gate is no fault");
  assert.match(s.stderr(), /faults off: .*kill file/);
  fs.rmSync(w.kill);
  assert.equal(text(await echo(s, "c")), "injected by the test", "faults on again once the kill file is gone");
});

test("--fault-delay holds the call; the kill file sends it within a second or so", async (t) => {
  const w = world(t);
  const s = await connect(t, w, ["--fault-tool", "echo", "--fault-delay", "60s"]);
  const started = Date.now();
  const call = echo(s, "late", { timeout: 120000 });
  await new Promise((r) => setTimeout(r, 500));
  fs.writeFileSync(w.kill, "stop\n");
  const r = await call;
  assert.equal(text(r), "Echo: late");
  const took = Date.now() - started;
  assert.ok(took < 30000, `the delayed call ended ${took} ms after it began (the delay is 60 s)`);
});

test("FAULTLINE_DISABLED: no fault, the rules still apply; --fault-pct faults a share", async (t) => {
  const w = world(t);
  const off = await connect(t, w, ["--enforce", "--deny-tool", "get-sum", "--fault-tool", "*", "--fault-error", "x"], { FAULTLINE_DISABLED: "1" });
  assert.equal(text(await echo(off, "on")), "Echo: on");
  const denied = await off.client.callTool({ name: "get-sum", arguments: { a: 1, b: 2 } });
  assert.equal(denied.isError, true);
  const some = await connect(t, w, ["--fault-tool", "echo", "--fault-error", "x", "--fault-pct", "50"]);
  let faulted = 0;
  for (let i = 0; i < 40; i++) faulted += (await echo(some, String(i))).isError ? 1 : 0;
  assert.ok(faulted > 0 && faulted < 40, `${faulted} of 40 faulted at 50%`);
});

test("--trace: every message both ways, secrets redacted", async (t) => {
  const w = world(t);
  const trace = path.join(w.root, "trace.jsonl");
  const s = await connect(t, w, ["--trace", trace]);
  await s.client.callTool({ name: "echo", arguments: { message: "password=hunter2 and Bearer abc.def", api_key: "sekrit-123" } });
  await s.client.close();
  const body = fs.readFileSync(trace, "utf8");
  assert.doesNotMatch(body, /hunter2|sekrit-123|abc\.def/);
  const lines = body.trim().split("\n").map((l) => JSON.parse(l));
  const call = lines.find((l) => l.to === "server" && l.message?.method === "tools/call");
  assert.equal(call.message.params.arguments.api_key, "[REDACTED]");
  assert.ok(lines.some((l) => l.to === "client" && l.message?.result?.content), "the server's answer is traced");
  assert.equal(fs.statSync(trace).mode & 0o777, 0o600);
});

test("bad fault flags name the flag (exit 2)", async () => {
  const { spawnSync } = await import("node:child_process");
  const run = (args) => spawnSync(FAULTCTL, ["mcp-guard", ...args, "--", "true"], { encoding: "utf8" });
  let r = run(["--fault-tool", "echo"]);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /--fault-tool: give one of --fault-error TEXT or --fault-delay D/);
  r = run(["--fault-error", "x"]);
  assert.match(r.stderr, /--fault-error goes with --fault-tool/);
  r = run(["--fault-tool", "echo", "--fault-delay", "5"]);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /--fault-delay/);
  r = run(["--fault-tool", "echo", "--fault-error", "x", "--fault-pct", "120"]);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /--fault-pct/);
});
