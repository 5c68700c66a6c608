// The MCP server inventory (GET /v1/guardrails/mcp-servers) and its card in
// Debian's headless Chromium: a real faultcp on loopback, a stand-in posting
// the activity two MCP guards write (each server's own chain per identity,
// "IDENTITY/mcp:SERVER", hashed as the guard hashes it), and the card showing
// each server's totals, its tools and who used it. The windows: an entry two
// hours old counts in 7d, not in 1h; an unknown window is a 400 naming it.
'use strict';

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { FAULTCP, ARTIFACTS, fail, startFaultcp, call, makeChain, launchChromium, signedInPage, stopFaultcp, runMain, signUpWithAgent } =
  require('./faultcp_harness');

const HOUR = 3600 * 1000;

function mcpCall(server, tool, f = {}) {
  return { kind: 'mcp', method: 'tools/call', host: server, path: tool, ...f };
}

async function main() {
  if (!FAULTCP) fail('FAULTCP (the faultcp binary) is not set');
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fl-mcp-dashboard-'));
  const { cp, base } = await startFaultcp(path.join(dir, 'cp.db'));
  let browser = null;
  try {
    const { signup, agent: guard } = await signUpWithAgent(base);
    const entry = makeChain();
    const aliceFs = 'alice@laptop-7/mcp:server-filesystem';
    const entries = [
      entry(aliceFs, mcpCall('server-filesystem', 'list_directory', { ts: new Date(Date.now() - 2 * HOUR).toISOString() })),
      entry(aliceFs, mcpCall('server-filesystem', 'read_file')),
      entry(aliceFs, mcpCall('server-filesystem', 'write_file', { verdict: 'deny', rule: '--deny-tool write_file' })),
      entry('bob@ci/mcp:server-filesystem', mcpCall('server-filesystem', 'read_file')),
      entry('alice@laptop-7/mcp:server-everything', mcpCall('server-everything', 'echo')),
      entry('alice@laptop-7/mcp:server-everything', { kind: 'mcp_finding', method: 'tools/list', host: 'server-everything',
        path: 'add', verdict: 'deny', rule: 'rug_pull' }),
      // Not MCP: a request of the HTTP guard stays out of the inventory.
      entry('alice@laptop-7', { host: 'github.com', path: '/acme/app' }),
    ];
    const posted = await call(base, 'POST', '/v1/guardrails/activity', guard, { entries });
    if (posted.stored !== entries.length || posted.flagged.length) fail('the activity did not land: ' + JSON.stringify(posted));

    // The API: 7d (the default) has all of it, 1h not the old call.
    const week = await call(base, 'GET', '/v1/guardrails/mcp-servers', signup.token);
    if (week.window !== '7d') fail('the default window is ' + week.window);
    const names = week.servers.map((s) => s.server);
    if (JSON.stringify(names) !== '["server-everything","server-filesystem"]') fail('servers: ' + JSON.stringify(names));
    const fsServer = week.servers.find((s) => s.server === 'server-filesystem');
    if (fsServer.calls !== 4 || fsServer.denied !== 1) fail('server-filesystem totals: ' + JSON.stringify(fsServer));
    if (JSON.stringify(fsServer.identities) !== '["alice@laptop-7","bob@ci"]') fail('identities: ' + JSON.stringify(fsServer.identities));
    const readFile = fsServer.tools.find((t) => t.tool === 'read_file');
    if (!readFile || readFile.calls !== 2 || readFile.identities.length !== 2) fail('read_file: ' + JSON.stringify(readFile));
    const writeFile = fsServer.tools.find((t) => t.tool === 'write_file');
    if (!writeFile || writeFile.denied !== 1 || !(writeFile.last_seen_ms > Date.now() - 60000)) fail('write_file: ' + JSON.stringify(writeFile));
    const everything = week.servers.find((s) => s.server === 'server-everything');
    if (everything.calls !== 1 || everything.findings !== 1) fail('server-everything: ' + JSON.stringify(everything));
    const hour = await call(base, 'GET', '/v1/guardrails/mcp-servers?window=1h', signup.token);
    const fsHour = hour.servers.find((s) => s.server === 'server-filesystem');
    if (hour.window !== '1h' || fsHour.calls !== 3 || fsHour.tools.some((t) => t.tool === 'list_directory'))
      fail('1h still counts the call of two hours ago: ' + JSON.stringify(fsHour));
    const bad = await fetch(base + '/v1/guardrails/mcp-servers?window=1y', { headers: { Authorization: 'Bearer ' + signup.token } });
    const badBody = await bad.json();
    if (bad.status !== 400 || !/window: '1y' is not one of 1h, 24h, 7d, 30d, 90d/.test(badBody.error))
      fail('window=1y: ' + bad.status + ' ' + JSON.stringify(badBody));
    const asGuard = await fetch(base + '/v1/guardrails/mcp-servers', { headers: { Authorization: 'Bearer ' + guard } });
    if (asGuard.status !== 403) fail('an agent token read the inventory: ' + asGuard.status);
    console.log('the inventory counts per server, tool and identity; 1h and 7d differ; window=1y is a 400');

    // The card: a row per server, then one per tool.
    browser = await launchChromium(dir);
    const { page, pageErrors, foreign } = await signedInPage(browser, base);
    await page.waitForSelector('#mcp-servers tbody tr.mcp-server[data-server="server-filesystem"]', { timeout: 5000 });
    const shown = await page.$$eval('#mcp-servers tbody tr', (trs) => trs.map((tr) => ({
      server: tr.dataset.server, tool: tr.dataset.tool || '', cells: [...tr.children].map((td) => td.textContent),
    })));
    const serverRow = shown.find((r) => r.server === 'server-filesystem' && !r.tool);
    if (serverRow.cells[2] !== '4' || serverRow.cells[3] !== '1' || serverRow.cells[7] !== 'alice@laptop-7, bob@ci')
      fail('the server row: ' + JSON.stringify(serverRow));
    const toolRow = shown.find((r) => r.server === 'server-filesystem' && r.tool === 'write_file');
    if (!toolRow || toolRow.cells[3] !== '1' || toolRow.cells[7] !== 'alice@laptop-7') fail('the write_file row: ' + JSON.stringify(toolRow));
    const finding = shown.find((r) => r.server === 'server-everything' && r.tool === 'add');
    if (!finding || finding.cells[5] !== '1') fail('the rug pull of add: ' + JSON.stringify(finding));
    if (shown.some((r) => r.server === 'github.com')) fail('an HTTP request shows as an MCP server');

    // A new call shows within a second.
    const sent = Date.now();
    await call(base, 'POST', '/v1/guardrails/activity', guard,
      { entries: [entry('bob@ci/mcp:server-filesystem', mcpCall('server-filesystem', 'move_file'))] });
    await page.waitForSelector('#mcp-servers tbody tr[data-tool="move_file"]', { timeout: 3000, polling: 20 });
    const took = Date.now() - sent;
    if (took >= 1000) fail('a new MCP call took ' + took + ' ms to show');
    await page.screenshot({ path: path.join(ARTIFACTS, 'guard-mcp-servers.png'), fullPage: true });
    if (pageErrors.length) fail('page errors: ' + pageErrors.join('; '));
    if (foreign.length) fail('the page fetched from elsewhere: ' + foreign.join(', '));
    console.log('PASS: the MCP servers card (a new call shown in ' + took + ' ms; screenshot in ' + ARTIFACTS + ')');
  } finally {
    if (browser) await browser.close();
    await stopFaultcp(cp, dir);
  }
}

runMain(main);
