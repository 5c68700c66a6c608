// faultctl mcp-guard between the official MCP SDK's client and real servers
// (the filesystem server, and a rug-pull server built with the SDK), over
// stdio as agents run them. Each test has its own folder, state folder and
// runtime folder (the approvals socket), removed at its end.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { FAULTCTL, FS_SERVER, connect, faultctl, here, tempWorld, text, until } from "./harness.mjs";

const { ToolListChangedNotificationSchema } = await import("@modelcontextprotocol/sdk/types.js");
const RUG_SERVER = path.join(here, "rug_pull_server.mjs");

test("a denied write_file is an isError result and writes nothing; read_file works; the log verifies", async (t) => {
  const w = tempWorld(t);
  fs.writeFileSync(path.join(w.files, "hello.txt"), "hello from the disk\n");
  const s = await connect(t, w, ["--enforce", "--deny-tool", "write_file", "--server-name", "fs"], [
    process.execPath,
    FS_SERVER,
    w.files,
  ]);
  const target = path.join(w.files, "written.txt");
  const denied = await s.client.callTool({ name: "write_file", arguments: { path: target, content: "x" } });
  assert.equal(denied.isError, true);
  assert.equal(text(denied), "blocked by faultline: --deny-tool write_file: denied by rule");
  assert.equal(fs.existsSync(target), false, "the denied write reached the disk");
  const read = await s.client.callTool({ name: "read_file", arguments: { path: path.join(w.files, "hello.txt") } });
  assert.notEqual(read.isError, true);
  assert.equal(text(read), "hello from the disk\n");
  await s.client.close();
  const out = faultctl(w, ["activity", "verify", w.log]);
  assert.match(out, /intact/);
  const lines = fs.readFileSync(w.log, "utf8").trim().split("\n").map((l) => JSON.parse(l));
  assert.deepEqual(
    lines.map((l) => [l.kind, l.method, l.host, l.path, l.verdict, l.rule]),
    [
      ["mcp", "tools/call", "fs", "write_file", "deny", "--deny-tool write_file"],
      ["mcp", "tools/call", "fs", "read_file", "allow", ""],
    ],
  );
});

test("a path rule from a policy file: .. is resolved before the prefix is compared", async (t) => {
  const w = tempWorld(t);
  const secret = path.join(w.files, "secret");
  fs.mkdirSync(secret);
  fs.writeFileSync(path.join(secret, "key.txt"), "k");
  const policy = path.join(w.root, "policy.yaml");
  fs.writeFileSync(
    policy,
    `mode: enforce\nrules:\n  - name: no-secret\n    action: deny\n    reason: the secret folder\n` +
      `    mcp_tool: "read_*"\n    mcp_args:\n      - {arg: /path, prefix: "${secret}/"}\n`,
  );
  const s = await connect(t, w, ["--policy", policy, "--server-name", "fs"], [process.execPath, FS_SERVER, w.files]);
  const r = await s.client.callTool({
    name: "read_text_file",
    arguments: { path: `${w.files}/other/..//secret/key.txt` },
  });
  assert.equal(r.isError, true);
  assert.equal(text(r), "blocked by faultline: no-secret: the secret folder");
});

test("SIGHUP re-reads --policy: a call allowed before is denied after; a bad file keeps the policy", async (t) => {
  const w = tempWorld(t);
  const policy = path.join(w.root, "policy.yaml");
  fs.writeFileSync(policy, "mode: enforce\nrules: []\n");
  const s = await connect(t, w, ["--policy", policy, "--server-name", "fs"], [process.execPath, FS_SERVER, w.files]);
  const before = await s.client.callTool({ name: "write_file", arguments: { path: path.join(w.files, "1"), content: "1" } });
  assert.notEqual(before.isError, true);
  fs.writeFileSync(policy, "mode: enforce\nrules:\n  - {name: no-writes, action: deny, mcp_tool: write_*}\n");
  process.kill(s.transport.pid, "SIGHUP");
  await until("the reload", () => s.stderr().includes("SIGHUP: policy reloaded"));
  const after = await s.client.callTool({ name: "write_file", arguments: { path: path.join(w.files, "2"), content: "2" } });
  assert.equal(text(after), "blocked by faultline: no-writes: denied by rule");
  assert.equal(fs.existsSync(path.join(w.files, "2")), false);
  fs.writeFileSync(policy, "mode: enforce\nrules:\n  - {name: x, action: block, mcp_tool: a}\n");
  process.kill(s.transport.pid, "SIGHUP");
  await until("the refusal", () => s.stderr().includes("SIGHUP: the policy stays as it was"));
  assert.match(s.stderr(), /policy\.yaml:3:23: rules\[0\]\.action: 'block': expected allow, deny or approve/);
  const still = await s.client.callTool({ name: "write_file", arguments: { path: path.join(w.files, "3"), content: "3" } });
  assert.equal(still.isError, true);
});

test("a held write_file goes through once approved with faultctl approvals approve", async (t) => {
  const w = tempWorld(t);
  const s = await connect(t, w, ["--enforce", "--approve-tool", "write_*", "--server-name", "fs"], [
    process.execPath,
    FS_SERVER,
    w.files,
  ]);
  const target = path.join(w.files, "approved.txt");
  const call = s.client.callTool(
    { name: "write_file", arguments: { path: target, content: "approved" } },
    undefined,
    { timeout: 60000 },
  );
  const held = await until("the held call", () => {
    const list = JSON.parse(faultctl(w, ["approvals", "list", "--json"]));
    const all = Array.isArray(list) ? list : list.approvals ?? [];
    return all.find((a) => a.host === "fs");
  });
  assert.equal(fs.existsSync(target), false, "written before it was approved");
  faultctl(w, ["approvals", "approve", held.id]);
  const r = await call;
  assert.notEqual(r.isError, true);
  assert.equal(fs.readFileSync(target, "utf8"), "approved");
});

test("a rug pull is found after list_changed and the changed tool is hidden and denied", async (t) => {
  const w = tempWorld(t);
  const s = await connect(t, w, ["--enforce", "--server-name", "rug"], [process.execPath, RUG_SERVER]);
  let changed = false;
  s.client.setNotificationHandler(ToolListChangedNotificationSchema, () => (changed = true));
  const first = await s.client.listTools();
  assert.deepEqual(first.tools.map((x) => x.name).sort(), ["clock", "notes"]);
  await until("notifications/tools/list_changed", () => changed);
  await until("the guard's finding", () => s.stderr().includes("rug_pull: tool notes"));
  const second = await s.client.listTools();
  assert.deepEqual(second.tools.map((x) => x.name), ["clock"]);
  const r = await s.client.callTool({ name: "notes", arguments: { text: "hi" } });
  assert.equal(r.isError, true);
  assert.match(text(r), /^blocked by faultline: rug_pull: the tool's definition changed since it was pinned/);
  const clock = await s.client.callTool({ name: "clock", arguments: {} });
  assert.equal(text(clock), "1970-01-01T00:00:00.000Z");
  const pins = JSON.parse(faultctl(w, ["mcp-guard", "pins", "list", "--json", "--state-dir", w.state]));
  assert.ok(pins.rug.notes.pending.length === 64 && pins.rug.notes.pending !== pins.rug.notes.hash);
  assert.equal(pins.rug.clock.pending, "");
  assert.match(faultctl(w, ["mcp-guard", "pins", "accept", "rug", "notes", "--state-dir", w.state]), /pinned rug notes/);
  const third = await s.client.listTools();
  assert.deepEqual(third.tools.map((x) => x.name).sort(), ["clock", "notes"]);
});

test("monitor: the rug pull is a finding, the tool stays", async (t) => {
  const w = tempWorld(t);
  const s = await connect(t, w, ["--server-name", "rug"], [process.execPath, RUG_SERVER]);
  await s.client.listTools();
  await until("the guard's finding", () => s.stderr().includes("rug_pull: tool notes"));
  const second = await s.client.listTools();
  assert.deepEqual(second.tools.map((x) => x.name).sort(), ["clock", "notes"]);
  const r = await s.client.callTool({ name: "notes", arguments: { text: "hi" } });
  assert.equal(text(r), "saved: hi");
});

test("--dry-run: write_file answers would execute and writes nothing; read_file runs", async (t) => {
  const w = tempWorld(t);
  fs.writeFileSync(path.join(w.files, "a.txt"), "a");
  const s = await connect(t, w, ["--dry-run", "--server-name", "fs"], [process.execPath, FS_SERVER, w.files]);
  await s.client.listTools();  // the annotations come with the list
  const target = path.join(w.files, "dry.txt");
  const r = await s.client.callTool({ name: "write_file", arguments: { path: target, content: "x" } });
  assert.match(text(r), /^would execute: write_file /);
  assert.equal(fs.existsSync(target), false);
  const read = await s.client.callTool({ name: "read_text_file", arguments: { path: path.join(w.files, "a.txt") } });
  assert.equal(text(read), "a");
});

test("garbage gets -32700, an oversized line -32600, and the session goes on", async (t) => {
  const w = tempWorld(t);
  const child = spawn(
    FAULTCTL,
    ["mcp-guard", "--state-dir", w.state, "--server-name", "fs", "--", process.execPath, FS_SERVER, w.files],
    { env: w.env, stdio: ["pipe", "pipe", "pipe"] },
  );
  t.after(() => child.kill());
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  const lines = () => out.split("\n").filter((l) => l.trim() !== "").map((l) => JSON.parse(l));
  child.stdin.write("this is not json\n");
  await until("the parse error", () => lines().length >= 1);
  assert.equal(lines()[0].error.code, -32700);
  assert.equal(lines()[0].id, null);
  child.stdin.write(`{"jsonrpc":"2.0","id":9,"method":"x","params":{"pad":"${"a".repeat(11 * 1024 * 1024)}"}}\n`);
  await until("the oversized line's error", () => lines().length >= 2);
  assert.equal(lines()[1].error.code, -32600);
  child.stdin.write(
    JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } },
    }) + "\n",
  );
  await until("the initialize answer", () => lines().length >= 3);
  assert.equal(lines()[2].id, 1);
  assert.ok(lines()[2].result.serverInfo);
  child.stdin.end();
  const code = await new Promise((r) => child.on("exit", r));
  assert.equal(code, 0);
});
