// faultctl mcp-guard install | status | uninstall over a temporary HOME and
// project folder: Claude Desktop's, Claude Code's (user and project) and
// Cursor's files. A diff by default; --apply wraps, keeps every other key, is
// idempotent; the wrapped entry runs (the SDK's client through it to the
// pinned server-everything); uninstall gives back the very bytes; a malformed
// file is named with its position and nothing is written anywhere.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { Client, EVERYTHING, FAULTCTL, StdioClientTransport } from "./harness.mjs";


function world(t) {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "fl-mcpi-"));
  const w = {
    root,
    home: path.join(root, "home"),
    project: path.join(root, "project"),
    state: path.join(root, "state"),
    run: path.join(root, "run"),
  };
  for (const d of [w.home, w.project, path.join(w.home, ".config/Claude"), path.join(w.home, ".cursor")])
    fs.mkdirSync(d, { recursive: true });
  fs.mkdirSync(w.run, { mode: 0o700 });
  w.env = { ...process.env, HOME: w.home, XDG_CONFIG_HOME: "", FAULTLINE_STATE_DIR: w.state, XDG_RUNTIME_DIR: w.run };
  w.files = {
    desktop: path.join(w.home, ".config/Claude/claude_desktop_config.json"),
    user: path.join(w.home, ".claude.json"),
    project: path.join(w.project, ".mcp.json"),
    cursor: path.join(w.home, ".cursor/mcp.json"),
  };
  // As the clients write them (two-space JSON), with keys of their own.
  const write = (f, v) => fs.writeFileSync(f, JSON.stringify(v, null, 2) + "\n");
  write(w.files.desktop, { mcpServers: { everything: { command: process.execPath, args: [EVERYTHING, "stdio"] } }, theme: "dark" });
  write(w.files.user, {
    numStartups: 7,
    mcpServers: { remote: { type: "http", url: "https://mcp.example.com/mcp", headers: { "X-Team": "a" } } },
    projects: { [w.project]: { allowedTools: [] } },
  });
  write(w.files.project, {
    mcpServers: { everything: { type: "stdio", command: process.execPath, args: [EVERYTHING, "stdio"], env: { KEEP: "1" } } },
  });
  write(w.files.cursor, { mcpServers: { ev: { command: process.execPath, args: [EVERYTHING, "stdio"] } } });
  t.after(() => fs.rmSync(root, { recursive: true, force: true }));
  return w;
}

const faultctl = (w, args) => spawnSync(FAULTCTL, ["mcp-guard", ...args], { env: w.env, cwd: w.project, encoding: "utf8" });
const bytes = (w) => Object.fromEntries(Object.entries(w.files).map(([k, f]) => [k, fs.readFileSync(f, "utf8")]));

test("install: a diff, then --apply wraps every client's servers, keeps other keys, and runs; uninstall gives the bytes back", async (t) => {
  const w = world(t);
  const original = bytes(w);
  let r = faultctl(w, ["status"]);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /Claude Desktop: .*claude_desktop_config\.json\n  everything: unguarded \(stdio\)/);
  assert.match(r.stdout, /remote: unguarded \(http\)/);

  r = faultctl(w, ["install", "--", "--enforce", "--deny-tool", "get-sum"]);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /4 servers in 4 files: nothing written \(--apply writes it\)/);
  assert.match(r.stdout, /^-  "ev": /m);
  assert.deepEqual(bytes(w), original, "a diff writes nothing");

  r = faultctl(w, ["install", "--apply", "--", "--enforce", "--deny-tool", "get-sum"]);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /wrapped 4 servers in 4 files/);
  const user = JSON.parse(fs.readFileSync(w.files.user, "utf8"));
  assert.equal(user.numStartups, 7);
  assert.deepEqual(Object.keys(user), ["numStartups", "mcpServers", "projects"], "keys and their order kept");
  assert.deepEqual(user.mcpServers.remote.args.slice(-4), ["--upstream-url", "https://mcp.example.com/mcp", "--upstream-header", "X-Team: a"]);
  assert.equal(JSON.parse(fs.readFileSync(w.files.desktop, "utf8")).theme, "dark");
  const project = JSON.parse(fs.readFileSync(w.files.project, "utf8")).mcpServers.everything;
  assert.deepEqual(project.env, { KEEP: "1" });
  assert.equal(project.command, FAULTCTL);

  // Idempotent: nothing more to do, not a byte changed.
  const applied = bytes(w);
  r = faultctl(w, ["install", "--apply", "--", "--enforce", "--deny-tool", "get-sum"]);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /nothing to change/);
  assert.deepEqual(bytes(w), applied);

  r = faultctl(w, ["status"]);
  assert.match(r.stdout, /everything: guarded: enforce, default allow, 1 tool rule/);

  // The wrapped entry, run as a client would run it.
  const transport = new StdioClientTransport({ command: project.command, args: project.args, env: { ...w.env, ...project.env }, stderr: "pipe" });
  const client = new Client({ name: "faultline-test", version: "1.0.0" });
  await client.connect(transport);
  t.after(() => client.close());
  const echo = await client.callTool({ name: "echo", arguments: { message: "installed" } });
  assert.equal(echo.content[0].text, "Echo: installed");
  const denied = await client.callTool({ name: "get-sum", arguments: { a: 1, b: 2 } });
  assert.equal(denied.isError, true);
  assert.equal(denied.content[0].text, "blocked by faultline: --deny-tool get-sum: denied by rule");
  await client.close();

  r = faultctl(w, ["uninstall", "--apply"]);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /restored 4 servers in 4 files/);
  assert.deepEqual(bytes(w), original, "uninstall gives back the very bytes");
  r = faultctl(w, ["uninstall", "--apply"]);
  assert.match(r.stdout, /no server is wrapped: nothing to change/);
});

test("a malformed config stays untouched, its position named; nothing is written anywhere", (t) => {
  const w = world(t);
  fs.writeFileSync(w.files.cursor, '{"mcpServers": {"a": {"command": "x"}},\n  "b": [1,}\n');
  const original = bytes(w);
  let r = faultctl(w, ["install", "--apply"]);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /\.cursor\/mcp\.json:2:11: not JSON \(.*\): left as it is/);
  assert.match(r.stderr, /nothing changed in any file/);
  assert.deepEqual(bytes(w), original);
  r = faultctl(w, ["status"]);
  assert.equal(r.status, 2);
  assert.match(r.stdout, /everything: unguarded/, "the other files still get their verdicts");
  r = faultctl(w, ["install", "--", "--deny-tool", "a b"]);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /install: the guard flags: --deny-tool 'a b'/);
  r = faultctl(w, ["install", "--", "--server-name", "x"]);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /--server-name is set by install for each server/);
});
