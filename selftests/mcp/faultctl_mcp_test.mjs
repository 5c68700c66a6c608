// faultctl mcp: faultcp's read tools as an MCP server, driven by the SDK's
// client against a real faultcp (SQLite in a temporary folder, a free
// loopback port) with an API token minted through its REST API.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { Client, FAULTCTL, StdioClientTransport, controlPlane } from "./harness.mjs";

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
