// What the dashboard tests share: a real faultcp on loopback with a private
// SQLite file, its REST API called as a client would, and the settings every
// test reads from the environment (the binaries, Chromium, the artifacts folder).
'use strict';

const { spawn } = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');
const puppeteer = require('puppeteer-core');

const FAULTCP = process.env.FAULTCP;
const ARTIFACTS = process.env.ARTIFACTS || path.join(os.tmpdir(), 'faultcp-dashboard');
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const EMAIL = 'ops@example.com';
const PASSWORD = 'correct horse battery staple';

function fail(msg) {
  throw new Error(msg);
}

// faultcp serve on 127.0.0.1:0 with its database at dbFile; `extra` flags after.
async function startFaultcp(dbFile, extra = []) {
  const cp = spawn(FAULTCP, ['serve', '--listen', '127.0.0.1:0', '--database', 'sqlite:' + dbFile, ...extra],
    { stdio: ['ignore', 'pipe', 'inherit'] });
  const lines = readline.createInterface({ input: cp.stdout });
  const port = await new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('faultcp did not start in 20 s')), 20000);
    lines.on('line', (l) => {
      const m = /listening on 127\.0\.0\.1:(\d+)/.exec(l);
      if (m) { clearTimeout(t); resolve(Number(m[1])); }
    });
    cp.on('exit', (code) => reject(new Error('faultcp exited ' + code)));
  });
  return { cp, base: 'http://127.0.0.1:' + port };
}

// One REST call; a status other than 2xx fails the test, naming the route.
// A GET whose pooled keep-alive connection the server closed just as it was
// reused (undici's "other side closed") is sent once more on a new one; other
// methods are not repeated.
async function call(base, method, p, token, body) {
  const headers = {};
  if (token) headers.Authorization = 'Bearer ' + token;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const send = () => fetch(base + p, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  let r;
  try {
    r = await send();
  } catch (e) {
    if (method !== 'GET' || !e.cause || e.cause.code !== 'UND_ERR_SOCKET') throw e;
    r = await send();
  }
  const j = await r.json().catch(() => null);
  if (!r.ok) fail(method + ' ' + p + ': ' + r.status + ' ' + JSON.stringify(j));
  return j;
}

// The guard's activity chain (userspace/guard/activity_log.h), for a stand-in
// guard: entry(identity, fields) is the next entry of that identity, hashed as
// the guard hashes it (the canonical line is the entry without its hash,
// compact, fields in this order). fields: kind (default llm when llm is given,
// else request), method (GET), host, path (/), verdict (allow), rule, reason
// (only when given: a line without one has no such field), llm.
function makeChain() {
  const heads = new Map();
  return (identity, f) => {
    const head = heads.get(identity) || { seq: 0, hash: '' };
    const e = {
      seq: head.seq + 1, ts: f.ts || new Date().toISOString(), identity, kind: f.kind || (f.llm ? 'llm' : 'request'),
      method: f.method || 'GET', host: f.host, path: f.path || '/', verdict: f.verdict || 'allow',
      rule: f.rule || '', ...(f.reason ? { reason: f.reason } : {}), llm: f.llm || null, prev: head.hash,
    };
    e.hash = crypto.createHash('sha256').update(JSON.stringify(e)).digest('hex');
    heads.set(identity, { seq: e.seq, hash: e.hash });
    return e;
  };
}

// Debian's headless Chromium with a private profile in `dir`.
function launchChromium(dir) {
  return puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    userDataDir: path.join(dir, 'profile'),
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run'],
  });
}

// A page of `browser` signed in to the dashboard at `base` as a person signs
// in (the form, then the app shown). It keeps the page's errors and every
// request that goes anywhere but faultcp; setup(page) runs before the first load.
async function signedInPage(browser, base, { height = 1400, setup } = {}) {
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height });
  const pageErrors = [];
  const foreign = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  page.on('request', (r) => { if (!r.url().startsWith(base)) foreign.push(r.url()); });
  if (setup) setup(page);
  await page.goto(base + '/dashboard', { waitUntil: 'load' });
  await page.type('#email', EMAIL);
  await page.type('#password', PASSWORD);
  await page.click('#signin button[type=submit]');
  await page.waitForSelector('#app:not([hidden])', { timeout: 10000 });
  return { page, pageErrors, foreign };
}

// A workspace 'ops' signed up at `base` and one agent (or guard) enrolled in
// it: the owner's signup answer and the agent's token.
async function signUpWithAgent(base, hostname = 'laptop-7', enrollment = 'guards') {
  const signup = await call(base, 'POST', '/v1/auth/signup', '', { email: EMAIL, password: PASSWORD, workspace: 'ops' });
  const enroll = await call(base, 'POST', '/v1/tokens', signup.token, { kind: 'enrollment', name: enrollment });
  const agent = (await call(base, 'POST', '/v1/agents/register', enroll.token, { hostname })).token;
  return { signup, agent };
}

// faultcp stopped (SIGTERM, then its exit) and its folder removed.
async function stopFaultcp(cp, dir) {
  cp.kill('SIGTERM');
  await new Promise((r) => cp.once('exit', r));
  fs.rmSync(dir, { recursive: true, force: true });
}

// A test's main() run: exit 0 when it resolves, 1 with its error when not.
function runMain(main) {
  main().then(() => process.exit(0), (e) => {
    console.error('FAIL: ' + (e && e.stack ? e.stack : e));
    process.exit(1);
  });
}

module.exports = {
  FAULTCP, ARTIFACTS, CHROMIUM, EMAIL, PASSWORD, fail, startFaultcp, stopFaultcp, call, makeChain, launchChromium,
  signedInPage, signUpWithAgent, runMain,
};
