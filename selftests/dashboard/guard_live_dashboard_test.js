// A real guard in faultcp's dashboard, in Debian's headless Chromium: faultctl
// guard (as nobody when run as root) reports to a real faultcp on loopback, its
// command's request is held by the workspace's approve rule, the held request
// shows in the dashboard's queue, and clicking Approve lets it through to its
// upstream within a second of the click.
'use strict';

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const { FAULTCP, ARTIFACTS, fail, startFaultcp, call, launchChromium, signedInPage, stopFaultcp, runMain, signUpWithAgent } =
  require('./faultcp_harness');

const FAULTCTL = process.env.FAULTCTL;

// An upstream that remembers when each request reached it.
async function startUpstream() {
  const seen = [];
  const server = http.createServer((req, res) => {
    seen.push({ at: Date.now(), url: req.url });
    res.end('up');
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { server, seen, host: '127.0.0.1:' + server.address().port };
}

async function until(pred, ms, what) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await pred();
    if (v) return v;
    if (Date.now() > end) fail('timed out waiting for ' + what);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function main() {
  if (!FAULTCP || !FAULTCTL) fail('FAULTCP and FAULTCTL (the binaries) must be set');
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fl-guard-live-dashboard-'));
  fs.chmodSync(dir, 0o777);  // nobody's guard keeps its state and CA here
  const { cp, base } = await startFaultcp(path.join(dir, 'cp.db'));
  const up = await startUpstream();
  let browser = null;
  let guard = null;
  try {
    const { signup, agent } = await signUpWithAgent(base);
    await call(base, 'PUT', '/v1/guardrails/policy', signup.token, {
      mode: 'enforce', default_allow: true,
      rules: [{ name: 'deploys', action: 'approve', host: up.host, reason: 'a person looks at deploys' }],
    });

    const argv = [FAULTCTL, 'guard', '--control-plane', base, '--token', agent, '--state-dir', path.join(dir, 'state'),
      '--identity', 'alice@laptop-7', '--',
      'curl', '-sS', '--max-time', '30', '-w', '[%{http_code}]', 'http://' + up.host + '/deploy'];
    const asUser = process.getuid() === 0
      ? ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups', '--', ...argv] : argv;
    const env = { ...process.env, FAULTLINE_CA_DIR: path.join(dir, 'ca'), XDG_RUNTIME_DIR: '', NO_PROXY: '',
      no_proxy: '', HTTP_PROXY: '', HTTPS_PROXY: '', http_proxy: '', https_proxy: '', FAULTLINE_CP: '',
      FAULTLINE_CP_TOKEN: '' };
    guard = spawn(asUser[0], asUser.slice(1), { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    guard.stdout.on('data', (d) => { out += d; });
    guard.stderr.on('data', (d) => { err += d; });
    const exited = new Promise((r) => guard.once('exit', (code) => r(code)));

    const held = await until(async () => {
      const list = await call(base, 'GET', '/v1/guardrails/approvals', signup.token);
      return list.approvals.find((a) => a.state === 'pending');
    }, 15000, 'the guard\'s held request in faultcp (guard stderr: ' + err + ')');
    if (held.identity !== 'alice@laptop-7' || held.path !== '/deploy') fail('held: ' + JSON.stringify(held));

    browser = await launchChromium(dir);
    const { page, pageErrors, foreign } = await signedInPage(browser, base);
    const pendingRow = '#approvals tbody tr[data-id="' + held.id + '"][data-state="pending"]';
    await page.waitForSelector(pendingRow + ' button.approve', { timeout: 5000 });
    const rowText = await page.$eval(pendingRow, (tr) => tr.textContent);
    if (!rowText.includes('/deploy') || !rowText.includes('alice@laptop-7')) fail('the row shows ' + rowText);
    await page.screenshot({ path: path.join(ARTIFACTS, 'guard-live-01-held.png'), fullPage: true });
    if (up.seen.length) fail('the upstream was reached before the approval');

    const clicked = Date.now();
    await page.click(pendingRow + ' button.approve');
    await until(() => up.seen.length > 0, 5000, 'the approved request at its upstream');
    const waited = up.seen[0].at - clicked;
    if (waited >= 1000) fail('the approved request reached its upstream ' + waited + ' ms after the click');
    console.log('Approve in the dashboard -> the request at its upstream in ' + waited + ' ms');
    const code = await exited;
    if (code !== 0 || out !== 'up[200]') fail('the guarded curl: exit ' + code + ', out ' + out + '\n' + err);
    await page.waitForSelector('#approvals tbody tr[data-id="' + held.id + '"][data-state="approved"]', { timeout: 2000 });
    await page.screenshot({ path: path.join(ARTIFACTS, 'guard-live-02-approved.png'), fullPage: true });
    if (pageErrors.length) fail('page errors: ' + pageErrors.join('; '));
    if (foreign.length) fail('the page fetched from elsewhere: ' + foreign.join(', '));
    console.log('PASS: a real guard approved from the dashboard (screenshots in ' + ARTIFACTS + ')');
  } finally {
    if (browser) await browser.close();
    if (guard && guard.exitCode === null) guard.kill('SIGKILL');
    up.server.close();
    await stopFaultcp(cp, dir);
  }
}

runMain(main);
