// The Anthropic SDK through `faultctl guard --optimize-cache MODE`: two
// messages.create calls with the same system prompt and the same tools
// listed in two orders, each answer's text printed. The C++ test reads the
// bodies the stand-in received.
// Node 20's fetch ignores HTTP_PROXY: the SDK gets a fetch that sends
// absolute-form requests to it.
//
//   node guard_cache_optimizer_sdk_test.js BASE_URL
'use strict';
const {makeProxyFetch} = require('./proxy_fetch');
const Anthropic = require('@anthropic-ai/sdk');

const [base] = process.argv.slice(2);
const proxy = process.env.HTTP_PROXY || process.env.http_proxy;
if (!base || !proxy) {
  console.error('usage: HTTP_PROXY=... node guard_cache_optimizer_sdk_test.js BASE_URL');
  process.exit(2);
}

const proxyFetch = makeProxyFetch(proxy);

const tools = {
  write_file: {
    name: 'write_file',
    description: 'Write a file. Ünïcödé and "quotes" stay as they are.',
    input_schema: {type: 'object', properties: {path: {type: 'string'}, text: {type: 'string'}}},
  },
  read_file: {
    name: 'read_file',
    description: 'Read a file.',
    input_schema: {type: 'object', properties: {path: {type: 'string'}}, required: ['path']},
  },
  grep: {
    name: 'grep',
    description: 'Search files.',
    input_schema: {type: 'object', properties: {pattern: {type: 'string'}}},
  },
};

async function main() {
  const anthropic = new Anthropic({apiKey: 'test-key', baseURL: base, fetch: proxyFetch, maxRetries: 0});
  for (const order of [['write_file', 'read_file', 'grep'], ['grep', 'write_file', 'read_file']]) {
    const message = await anthropic.messages.create({
      model: 'claude-test',
      max_tokens: 64,
      temperature: 0.7,
      system: 'You are a careful coding agent.\nFollow the repository\'s style.',
      tools: order.map((n) => tools[n]),
      messages: [{role: 'user', content: 'list the files'}],
    });
    console.log(order.join(',') + ' -> ' + message.content.map((b) => b.text).join(''));
  }
}

main().catch((e) => {
  console.error('FAILED: ' + (e && e.stack ? e.stack : e));
  process.exit(1);
});
