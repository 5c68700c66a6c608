// The MCP server inventory end to end: faultctl mcp-guard in front of the
// real filesystem and everything servers, driven by the SDK's client over
// stdio, reporting its activity to a real faultcp (--control-plane with an
// agent token; the second guard through faultctl's global flags), and
// GET /v1/guardrails/mcp-servers counting each server's calls, denials, tools
// and identities. Each guard's chain is its own ("IDENTITY/mcp:SERVER") and
// arrives intact; its local log verifies.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { EVERYTHING, FAULTCTL, FS_SERVER, connectFaultctl, controlPlane, text, until } from "./harness.mjs";

function tempWorld(t) {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "fl-mcpinv-"));
  const w = { root, files: path.join(root, "files"), state: path.join(root, "state"), run: path.join(root, "run") };
  fs.mkdirSync(w.files);
  fs.mkdirSync(w.run, { mode: 0o700 });
  w.env = { ...process.env, XDG_RUNTIME_DIR: w.run };
  delete w.env.FAULTLINE_CP;
  delete w.env.FAULTLINE_CP_TOKEN;
  t.after(() => fs.rmSync(root, { recursive: true, force: true }));
  return w;
}

const connect = (t, w, args) => connectFaultctl(t, w.env, args);


test("mcp-guard --control-plane: faultcp's inventory counts each server's calls, tools and identities", async (t) => {
  const w = tempWorld(t);
  const cp = await controlPlane(t);
  const enroll = await cp.call("POST", "/v1/tokens", { kind: "enrollment", name: "guards" }, cp.session);
  assert.equal(enroll.status, 201, JSON.stringify(enroll.body));
  const agent = await cp.call("POST", "/v1/agents/register", { hostname: "laptop-7" }, enroll.body.token);
  assert.equal(agent.status, 201, JSON.stringify(agent.body));
  const token = agent.body.token;

  fs.writeFileSync(path.join(w.files, "hello.txt"), "hello\n");
  const fsGuard = await connect(t, w, [
    "mcp-guard", "--state-dir", w.state, "--identity", "alice@laptop-7", "--enforce", "--deny-tool", "write_file",
    "--server-name", "fs", "--control-plane", cp.url, "--token", token, "--", process.execPath, FS_SERVER, w.files,
  ]);
  const read = await fsGuard.client.callTool({ name: "read_file", arguments: { path: path.join(w.files, "hello.txt") } });
  assert.equal(text(read), "hello\n");
  await fsGuard.client.callTool({ name: "read_file", arguments: { path: path.join(w.files, "hello.txt") } });
  const target = path.join(w.files, "written.txt");
  const denied = await fsGuard.client.callTool({ name: "write_file", arguments: { path: target, content: "x" } });
  assert.equal(denied.isError, true);
  assert.equal(fs.existsSync(target), false, "the denied write reached the disk");
  assert.match(fsGuard.stderr(), /faultcp http:\/\/127\.0\.0\.1:\d+.*: activity reported as alice@laptop-7\/mcp:fs/);

  // The global flags (before the command) reach mcp-guard as they reach guard.
  const everything = await connect(t, w, [
    "--control-plane", cp.url, "--token", token, "mcp-guard", "--state-dir", w.state, "--identity", "bob@ci",
    "--", process.execPath, EVERYTHING, "stdio",
  ]);
  const echoed = await everything.client.callTool({ name: "echo", arguments: { message: "hi" } });
  assert.notEqual(echoed.isError, true, text(echoed));

  const inventory = await until("the inventory", async () => {
    const r = await cp.call("GET", "/v1/guardrails/mcp-servers?window=1h", undefined, cp.session);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const fsRow = r.body.servers.find((s) => s.server === "fs");
    const ev = r.body.servers.find((s) => s.server === "server-everything");
    return fsRow && fsRow.calls === 3 && ev && ev.calls === 1 ? r.body : null;
  });
  assert.equal(inventory.window, "1h");
  const fsRow = inventory.servers.find((s) => s.server === "fs");
  assert.equal(fsRow.denied, 1);
  assert.deepEqual(fsRow.identities, ["alice@laptop-7"]);
  assert.deepEqual(fsRow.tools.map((x) => [x.tool, x.calls, x.denied]), [["read_file", 2, 0], ["write_file", 1, 1]]);
  assert.ok(fsRow.last_seen_ms > Date.now() - 60000 && fsRow.last_seen_ms <= Date.now() + 1000, String(fsRow.last_seen_ms));
  const ev = inventory.servers.find((s) => s.server === "server-everything");
  assert.deepEqual(ev.identities, ["bob@ci"]);
  assert.deepEqual(ev.tools.map((x) => x.tool), ["echo"]);

  // Each guard's own chain, intact at faultcp, and the local log verifies.
  const entries = await cp.call("GET", "/v1/guardrails/activity?identity=" + encodeURIComponent("alice@laptop-7/mcp:fs"), undefined, cp.session);
  assert.equal(entries.body.entries.length, 3);
  assert.ok(entries.body.entries.every((e) => e.chain === "ok" && e.kind === "mcp" && e.host === "fs"), JSON.stringify(entries.body));
  const log = path.join(w.state, "activity-alice@laptop-7_mcp_fs.jsonl");
  assert.match(execFileSync(FAULTCTL, ["activity", "verify", log], { env: w.env, encoding: "utf8" }), /3 entr/);
  const badWindow = await cp.call("GET", "/v1/guardrails/mcp-servers?window=2h", undefined, cp.session);
  assert.equal(badWindow.status, 400);
  assert.match(badWindow.body.error, /^window: '2h' is not one of 1h, 24h, 7d, 30d, 90d/);
});

test("mcp-guard --control-plane: bad flags are exit 2 naming the flag", () => {
  for (const [args, want] of [
    [["--control-plane", "http://127.0.0.1:9"], /--control-plane needs --token/],
    [["--token", "x"], /--token goes with --control-plane/],
    [["--control-plane", "", "--token", "x"], /--control-plane: empty URL/],
  ]) {
    let err = null;
    try {
      execFileSync(FAULTCTL, ["mcp-guard", ...args, "--", "true"], { encoding: "utf8", stdio: "pipe" });
    } catch (e) {
      err = e;
    }
    assert.ok(err, args.join(" ") + " was taken");
    assert.equal(err.status, 2);
    assert.match(err.stderr, want);
  }
});
