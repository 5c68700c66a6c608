// What the MCP suites share: the faultctl under test (FAULTCTL), the pinned
// packages of this folder (installed by scripts/install-deps.sh, npm ci here)
// checked once, the SDK's client and stdio transport, the servers' paths,
// a test's own folders with an SDK client connected through mcp-guard,
// until(), and a real faultcp (FAULTCP) for the suites that talk to one.
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const here = path.dirname(fileURLToPath(import.meta.url));
export const FAULTCTL = process.env.FAULTCTL;
assert.ok(FAULTCTL, "FAULTCTL: the faultctl binary to test");
for (const pkg of ["sdk", "server-everything", "server-filesystem"]) {
  if (!fs.existsSync(path.join(here, "node_modules/@modelcontextprotocol", pkg)))
    throw new Error(`${here}/node_modules is missing: run scripts/install-deps.sh (npm ci in selftests/mcp)`);
}
export const { Client } = await import("@modelcontextprotocol/sdk/client/index.js");
export const { StdioClientTransport } = await import("@modelcontextprotocol/sdk/client/stdio.js");
export const EVERYTHING = path.join(here, "node_modules/@modelcontextprotocol/server-everything/dist/index.js");
export const FS_SERVER = path.join(here, "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");

export function tempWorld(t) {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "fl-mcp-"));
  const w = {
    root,
    files: path.join(root, "files"),
    state: path.join(root, "state"),
    run: path.join(root, "run"),
    log: path.join(root, "activity.jsonl"),
  };
  fs.mkdirSync(w.files);
  fs.mkdirSync(w.run, { mode: 0o700 });
  w.env = { ...process.env, XDG_RUNTIME_DIR: w.run };
  t.after(() => fs.rmSync(root, { recursive: true, force: true }));
  return w;
}

// A client of the SDK connected to `faultctl ARGS` on stdio with `env`,
// closed at the test's end: { client, transport, stderr() }.
export async function connectFaultctl(t, env, args) {
  const transport = new StdioClientTransport({ command: FAULTCTL, args, env, stderr: "pipe" });
  let stderr = "";
  transport.stderr.on("data", (d) => (stderr += d));
  const client = new Client({ name: "faultline-test", version: "1.0.0" });
  await client.connect(transport);
  t.after(() => client.close());
  return { client, transport, stderr: () => stderr };
}

// A client of the SDK connected through `faultctl mcp-guard FLAGS -- SERVER`.
export function connect(t, w, flags, server) {
  return connectFaultctl(t, w.env, ["mcp-guard", "--state-dir", w.state, "--json-log", w.log, ...flags, "--", ...server]);
}

export const text = (result) => result.content.map((c) => c.text).join("");

export function faultctl(w, args) {
  return execFileSync(FAULTCTL, args, { env: w.env, encoding: "utf8" });
}

export async function until(what, fn, ms = 20000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

// faultcp (FAULTCP) on a free port with a fresh SQLite database, stopped at
// the test's end; a new workspace: its owner's session token, an API token,
// and call(method, path, body, token) -> { status, body }.
export async function controlPlane(t) {
  const FAULTCP = process.env.FAULTCP;
  assert.ok(FAULTCP, "FAULTCP: the faultcp binary to test");
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
  const call = async (method, p, body, token) => {
    const r = await fetch(url + p, {
      method,
      headers: token ? { authorization: `Bearer ${token}` } : {},
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: r.status, body: await r.json() };
  };
  const signup = await call("POST", "/v1/auth/signup", { email: "ana@example.com", password: "correct horse battery", workspace: "acme" });
  assert.equal(signup.status, 201, JSON.stringify(signup.body));
  const api = await call("POST", "/v1/tokens", { kind: "api", name: "mcp" }, signup.body.token);
  assert.equal(api.status, 201, JSON.stringify(api.body));
  return { url, session: signup.body.token, token: api.body.token, call };
}
