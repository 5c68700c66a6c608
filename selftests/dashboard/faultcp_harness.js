// What the dashboard tests share: a real faultcp on loopback with a private
// SQLite file, its REST API called as a client would, and the settings every
// test reads from the environment (the binaries, Chromium, the artifacts folder).
'use strict';

const { spawn } = require('node:child_process');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');

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

module.exports = { FAULTCP, ARTIFACTS, CHROMIUM, EMAIL, PASSWORD, fail, startFaultcp, call };
