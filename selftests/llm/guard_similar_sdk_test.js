// The Anthropic SDK through `faultctl guard --cache --cache-mode similar`:
// one messages.create per PROMPT, in order, each printed as
// "<prompt> -> <answer text>". The C++ test counts what reached the stand-in.
// Node 20's fetch ignores HTTP_PROXY: the SDK gets a fetch that sends
// absolute-form requests to it.
//
//   node guard_similar_sdk_test.js BASE_URL MAX_TOKENS:PROMPT...
'use strict';
const http = require('node:http');
const Anthropic = require('@anthropic-ai/sdk');

const [base, ...calls] = process.argv.slice(2);
const proxy = process.env.HTTP_PROXY || process.env.http_proxy;
if (!base || calls.length === 0 || !proxy) {
  console.error('usage: HTTP_PROXY=... node guard_similar_sdk_test.js BASE_URL MAX_TOKENS:PROMPT...');
  process.exit(2);
}

function proxyFetch(url, init = {}) {
  const p = new URL(proxy);
  const headers = {};
  new Headers(init.headers || {}).forEach((v, k) => (headers[k] = v));
  // With a length, not chunked: the stand-in reads bodies by Content-Length.
  if (init.body) headers['content-length'] = String(Buffer.byteLength(init.body));
  return new Promise((resolve, reject) => {
    const req = http.request(
        {host: p.hostname, port: p.port, method: init.method || 'GET', path: String(url), headers},
        (res) => {
          const chunks = [];
          res.on('data', (c) => chunks.push(c));
          res.on('end', () => {
            const h = new Headers();
            for (const [k, v] of Object.entries(res.headers)) h.set(k, Array.isArray(v) ? v.join(', ') : v);
            resolve(new Response(Buffer.concat(chunks), {status: res.statusCode, headers: h}));
          });
          res.on('error', reject);
        },
    );
    req.on('error', reject);
    if (init.body) req.write(init.body);
    req.end();
  });
}

async function main() {
  const anthropic = new Anthropic({apiKey: 'test-key', baseURL: base, fetch: proxyFetch, maxRetries: 0});
  for (const call of calls) {
    const colon = call.indexOf(':');
    const prompt = call.slice(colon + 1);
    const message = await anthropic.messages.create({
      model: 'claude-test',
      max_tokens: Number(call.slice(0, colon)),
      messages: [{role: 'user', content: prompt}],
    });
    console.log(prompt + ' -> ' + message.content.map((b) => b.text).join(''));
  }
}

main().catch((e) => {
  console.error('FAILED: ' + (e && e.stack ? e.stack : e));
  process.exit(1);
});
