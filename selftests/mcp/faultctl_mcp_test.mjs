// faultctl mcp: faultcp's read tools as an MCP server, driven by the SDK's
// client against a real faultcp (SQLite in a temporary folder, a free
// loopback port) with an API token minted through its REST API.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const FAULTCTL = process.env.FAULTCTL;
const FAULTCP = process.env.FAULTCP;
assert.ok(FAULTCTL && FAULTCP, "FAULTCTL and FAULTCP: the binaries to test");
const { Client } = await import("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = await import("@modelcontextprotocol/sdk/client/stdio.js");

async function until(what, fn, ms = 20000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

// faultcp on a free port with a fresh database; an API token of a new workspace.
async function controlPlane(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "fl-mcpcp-"));
  const cp = spawn(FAULTCP, ["serve", "--listen", "127.0.0.1:0", "--database", `sqlite:${dir}/cp.db`], { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  cp.stdout.on("data", (d) => (out += d));
  cp.stderr.on("data", (d) => (out += d));
  const exited = new Promise((r) => cp.on("exit", r));
  t.after(async () => {
    cp.kill("SIGTERM");
    await exited;
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const addr = (await until("faultcp's address", () => out.match(/listening on (\S+)/)))[1];
  const url = `http://${addr}`;
  const post = async (p, body, token) => {
    const r = await fetch(url + p, { method: "POST", headers: token ? { authorization: `Bearer ${token}` } : {}, body: JSON.stringify(body) });
    return { status: r.status, body: await r.json() };
  };
  const signup = await post("/v1/auth/signup", { email: "ana@example.com", password: "correct horse battery", workspace: "acme" });
  assert.equal(signup.status, 201, JSON.stringify(signup.body));
  const api = await post("/v1/tokens", { kind: "api", name: "mcp" }, signup.body.token);
  assert.equal(api.status, 201, JSON.stringify(api.body));
  return { url, token: api.body.token };
}

async function mcpClient(t, cp, extra = []) {
  const transport = new StdioClientTransport({
    command: FAULTCTL,
    args: ["--control-plane", cp.url, "--token", cp.token, "mcp", ...extra],
    stderr: "pipe",
  });
  const client = new Client({ name: "faultline-test", version: "1.0.0" });
  await client.connect(transport);
  t.after(() => client.close());
  return client;
}

const text = (r) => r.content.map((c) => c.text).join("");

test("faultctl mcp: the read tools answer from faultcp; actions only with --allow-actions", async (t) => {
  const cp = await controlPlane(t);
  const client = await mcpClient(t, cp);
  const names = (await client.listTools()).tools.map((x) => x.name);
  for (const n of ["list_agents", "get_agent", "list_experiments", "get_experiment", "watch_experiment", "get_policy", "get_kill_switch", "export_audit"])
    assert.ok(names.includes(n), `${n} listed`);
  assert.ok(!names.includes("run_experiment"), "no action tool without --allow-actions");
  const agents = await client.callTool({ name: "list_agents", arguments: {} });
  assert.notEqual(agents.isError, true, text(agents));
  JSON.parse(text(agents));
  const kill = await client.callTool({ name: "get_kill_switch", arguments: {} });
  assert.notEqual(kill.isError, true, text(kill));
  const missing = await client.callTool({ name: "get_experiment", arguments: { id: 4242 } });
  assert.equal(missing.isError, true);
  assert.match(text(missing), /^faultcp answered 404/);
  await assert.rejects(client.callTool({ name: "run_experiment", arguments: { spec: {} } }), /no tool 'run_experiment'/);

  const actor = await mcpClient(t, cp, ["--allow-actions"]);
  assert.ok((await actor.listTools()).tools.some((x) => x.name === "run_experiment"));
  const refused = await actor.callTool({ name: "run_experiment", arguments: { spec: { kind: "no-such-kind" } } });
  assert.equal(refused.isError, true);
  assert.match(text(refused), /^faultcp answered 4\d\d/);
});

test("faultctl mcp: a line that is not JSON is -32700 and the session goes on; no control plane is exit 2", () => {
  const r = spawnSync(FAULTCTL, ["--control-plane", "http://127.0.0.1:9/", "--token", "x", "mcp"], {
    input: 'not json\n{"jsonrpc":"2.0","id":1,"method":"ping"}\n',
    encoding: "utf8",
  });
  assert.equal(r.status, 0, r.stderr);
  const lines = r.stdout.trim().split("\n").map((l) => JSON.parse(l));
  assert.equal(lines[0].error.code, -32700);
  assert.deepEqual(lines[1], { jsonrpc: "2.0", id: 1, result: {} });
  const env = { ...process.env };
  delete env.FAULTLINE_CP;
  const none = spawnSync(FAULTCTL, ["mcp"], { env, encoding: "utf8" });
  assert.equal(none.status, 2);
  assert.match(none.stderr, /give --control-plane URL/);
});
