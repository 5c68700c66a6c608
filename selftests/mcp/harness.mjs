// What the MCP suites share: the faultctl under test (FAULTCTL), the pinned
// packages of this folder (installed by scripts/install-deps.sh, npm ci here)
// checked once, the SDK's client and stdio transport, and the servers' paths.
import assert from "node:assert/strict";
import fs from "node:fs";
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
