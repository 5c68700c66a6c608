// The Anthropic SDK through `faultctl guard --replay DIR`, once to record and
// once to replay: a JSON message and an SSE stream, each parsed by the SDK as
// it would parse a real answer. Prints "text json: ..." and "text stream: ...";
// writes what the client got (status, headers that frame it, body bytes) to
// OUT so the C++ test compares two runs byte for byte. Node 20's fetch ignores
// HTTP_PROXY: the SDK gets a fetch that sends absolute-form requests to it.
//
//   node guard_replay_sdk_test.js BASE_URL OUT
'use strict';
const fs = require('node:fs');
const {makeProxyFetch} = require('./proxy_fetch');
const Anthropic = require('@anthropic-ai/sdk');

const [base, out] = process.argv.slice(2);
const proxy = process.env.HTTP_PROXY || process.env.http_proxy;
if (!base || !out || !proxy) {
  console.error('usage: HTTP_PROXY=... node guard_replay_sdk_test.js BASE_URL OUT');
  process.exit(2);
}

const got = [];  // what the client got, per call
const proxyFetch = makeProxyFetch(proxy, {
  onAnswer: (res, body) =>
    got.push({status: res.statusCode, type: res.headers['content-type'], body: body.toString('base64')}),
});

async function main() {
  const anthropic = new Anthropic({apiKey: 'test-key', baseURL: base, fetch: proxyFetch, maxRetries: 0});
  const message = await anthropic.messages.create({
    model: 'claude-test',
    max_tokens: 16,
    messages: [{role: 'user', content: 'say hi'}],
  });
  console.log('text json: ' + message.content.map((b) => b.text).join(''));
  const stream = anthropic.messages.stream({
    model: 'claude-test',
    max_tokens: 16,
    messages: [{role: 'user', content: 'stream hi'}],
  });
  console.log('text stream: ' + (await stream.finalText()));
  fs.writeFileSync(out, JSON.stringify(got));
}

main().catch((e) => {
  console.error('FAILED: ' + (e && e.stack ? e.stack : e));
  process.exit(1);
});
