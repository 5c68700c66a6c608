// The openai SDK (pinned) under `faultctl guard --creds`: its own key is a
// stand-in that opens nothing, and the guard sets the real one on its HTTPS calls to the
// stand-in, through a CONNECT tunnel whose TLS the guard terminates (the
// guard's CA trusted through NODE_EXTRA_CA_CERTS, as the guard sets it).
// MODE ok: the call succeeds (the stand-in saw the right key); MODE denied:
// it raises PermissionDeniedError (rule creds) after one attempt. With
// ENV_OUT, this process's environment is written there first, for the test
// to search for the secret.
// Prints one "ok ..." line per check; exits 1 if any failed.
//
//   node guard_creds_sdk_test.js BASE_URL MODE [ENV_OUT]   (BASE_URL https://127.0.0.1:N)
'use strict';
const fs = require('node:fs');
const http = require('node:http');
const https = require('node:https');
const net = require('node:net');
const tls = require('node:tls');
const {guardedArgs, makeChecks} = require('./sdk_check');
const OpenAI = require('openai');

const {args: [base, mode, envOut], proxy} = guardedArgs('guard_creds_sdk_test.js', ['BASE_URL', 'MODE']);
const {check, exit} = makeChecks();
if (envOut) fs.writeFileSync(envOut, JSON.stringify(process.env));

// A fetch through the proxy's CONNECT, as an HTTPS proxy agent does: the
// tunnel's TLS is checked against the default roots plus NODE_EXTRA_CA_CERTS.
let attempts = 0;
function tunnelFetch(url, init = {}) {
  attempts++;
  const u = new URL(String(url));
  const p = new URL(proxy);
  const headers = {};
  new Headers(init.headers || {}).forEach((v, k) => (headers[k] = v));
  if (init.body) headers['content-length'] = String(Buffer.byteLength(init.body));
  return new Promise((resolve, reject) => {
    const connect = http.request({host: p.hostname, port: p.port, method: 'CONNECT', path: `${u.hostname}:${u.port}`});
    connect.on('connect', (res, socket) => {
      if (res.statusCode !== 200) return reject(new Error('CONNECT answered ' + res.statusCode));
      const req = https.request(
          {
            method: init.method || 'GET',
            host: u.hostname,
            port: u.port,
            path: u.pathname + u.search,
            headers,
            // No agent: the request goes over this connection, the tunnel's.
            createConnection: () =>
                tls.connect({socket, host: u.hostname, servername: net.isIP(u.hostname) ? undefined : u.hostname}),
          },
          (r) => {
            const chunks = [];
            r.on('data', (c) => chunks.push(c));
            r.on('end', () => {
              const h = new Headers();
              for (const [k, v] of Object.entries(r.headers)) h.set(k, Array.isArray(v) ? v.join(', ') : v);
              resolve(new Response(Buffer.concat(chunks), {status: r.statusCode, headers: h}));
            });
            r.on('error', reject);
          });
      req.on('error', reject);
      if (init.body) req.write(init.body);
      req.end();
    });
    connect.on('error', reject);
    connect.end();
  });
}

async function main() {
  const openai = new OpenAI({apiKey: 'sk-stand-in-the-agent-holds', baseURL: base + '/v1', fetch: tunnelFetch});
  try {
    const r = await openai.chat.completions.create({model: 'gpt-test', messages: [{role: 'user', content: 'hi'}]});
    check(mode === 'ok', 'openai: the call succeeds only when the guard holds the key', mode);
    check(r.choices[0].message.content === 'injected ok', 'openai: the stand-in accepted the injected key', r);
  } catch (e) {
    check(
        mode === 'denied', 'openai: the call fails only when the key is missing',
        e && e.message + (e.cause ? ': ' + e.cause.message : ''));
    check(e instanceof OpenAI.PermissionDeniedError, 'openai: PermissionDeniedError', e && e.constructor.name);
    check(e.status === 403, 'openai: status 403', e.status);
    check(attempts === 1, 'openai: exactly one attempt at default retries', attempts);
  }
  exit();
}

main().catch((e) => {
  console.error('FAILED: ' + (e && e.stack ? e.stack : e));
  process.exit(1);
});
