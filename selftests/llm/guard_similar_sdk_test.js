// The Anthropic SDK through `faultctl guard --cache --cache-mode similar`:
// one messages.create per PROMPT, in order, each printed as
// "<prompt> -> <answer text>". The C++ test counts what reached the stand-in.
// Node 20's fetch ignores HTTP_PROXY: the SDK gets a fetch that sends
// absolute-form requests to it.
//
//   node guard_similar_sdk_test.js BASE_URL MAX_TOKENS:PROMPT...
'use strict';
const {makeProxyFetch} = require('./proxy_fetch');
const Anthropic = require('@anthropic-ai/sdk');

const [base, ...calls] = process.argv.slice(2);
const proxy = process.env.HTTP_PROXY || process.env.http_proxy;
if (!base || calls.length === 0 || !proxy) {
  console.error('usage: HTTP_PROXY=... node guard_similar_sdk_test.js BASE_URL MAX_TOKENS:PROMPT...');
  process.exit(2);
}

const proxyFetch = makeProxyFetch(proxy);

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
