// The official SDKs (@anthropic-ai/sdk, openai) through `faultctl guard
// --enforce --block-responses`: an answer carrying a secret (the stand-in
// puts one in when the prompt says want-secret) raises the SDK's permission
// error class for a JSON answer (403, the provider's envelope, x-should-retry:
// false) and its APIError with the provider's error for a stream ended by the
// guard's mid-stream error event, each after exactly one attempt; a benign
// answer is read as usual. Node 20's fetch ignores HTTP_PROXY: the SDKs get a
// fetch that sends absolute-form requests to the guard's proxy.
// Prints one "ok ..." line per check; exits 1 if any failed.
//
//   node guard_response_sdk_test.js BASE_URL     (the stand-in, e.g. http://127.0.0.1:40111)
'use strict';
const {makeProxyFetch} = require('./proxy_fetch');
const {guardedArgs, makeChecks} = require('./sdk_check');
const Anthropic = require('@anthropic-ai/sdk');
const OpenAI = require('openai');

const {args: [base], proxy} = guardedArgs('guard_response_sdk_test.js', ['BASE_URL']);

const {check, exit} = makeChecks();

let attempts = 0;
const proxyFetch = makeProxyFetch(proxy, {onAttempt: () => attempts++});
const ask = 'Summarise the notes. want-secret';

async function main() {
  const anthropic = new Anthropic({apiKey: 'test-key', baseURL: base, fetch: proxyFetch});
  attempts = 0;
  try {
    await anthropic.messages.create({model: 'claude-test', max_tokens: 64, messages: [{role: 'user', content: ask}]});
    check(false, 'anthropic: the answer with a secret raises');
  } catch (e) {
    check(e instanceof Anthropic.PermissionDeniedError, 'anthropic: PermissionDeniedError', e && e.constructor.name);
    check(attempts === 1, 'anthropic: one attempt (JSON)', attempts);
  }

  attempts = 0;
  let text = '';
  try {
    const stream = await anthropic.messages.create(
        {model: 'claude-test', max_tokens: 64, stream: true, messages: [{role: 'user', content: ask}]});
    for await (const ev of stream)
      if (ev.type === 'content_block_delta' && ev.delta.type === 'text_delta') text += ev.delta.text;
    check(false, 'anthropic stream: the streamed answer with a secret raises');
  } catch (e) {
    check(
        e instanceof Anthropic.APIError && !(e instanceof Anthropic.APIConnectionError) && e.error &&
            e.error.error && e.error.error.type === 'permission_error',
        'anthropic stream: APIError permission_error', {name: e && e.constructor.name, error: e && e.error});
    check(attempts === 1, 'anthropic stream: one attempt', attempts);
    check(!text.includes('AKIA'), 'anthropic stream: the key never reached the client', text);
  }

  const openai = new OpenAI({apiKey: 'test-key', baseURL: base + '/v1', fetch: proxyFetch});
  attempts = 0;
  try {
    await openai.chat.completions.create({model: 'gpt-test', messages: [{role: 'user', content: ask}]});
    check(false, 'openai: the answer with a secret raises');
  } catch (e) {
    check(e instanceof OpenAI.PermissionDeniedError, 'openai: PermissionDeniedError', e && e.constructor.name);
    check(attempts === 1, 'openai: one attempt (JSON)', attempts);
  }

  attempts = 0;
  text = '';
  try {
    const stream = await openai.chat.completions.create(
        {model: 'gpt-test', stream: true, messages: [{role: 'user', content: ask}]});
    for await (const chunk of stream) text += (chunk.choices[0] && chunk.choices[0].delta.content) || '';
    check(false, 'openai stream: the streamed answer with a secret raises');
  } catch (e) {
    check(
        e instanceof OpenAI.APIError && !(e instanceof OpenAI.APIConnectionError) && e.error &&
            e.error.type === 'permission_error',
        'openai stream: APIError permission_error', {name: e && e.constructor.name, error: e && e.error});
    check(attempts === 1, 'openai stream: one attempt', attempts);
    check(text.startsWith('Here is the summary') && !text.includes('AKIA'),
          'openai stream: the opening streamed, the key did not', text);
  }

  const benign = await openai.chat.completions.create(
      {model: 'gpt-test', messages: [{role: 'user', content: 'Summarise the notes.'}]});
  check(benign.choices[0].message.content.endsWith('Nothing else to report.'), 'openai: benign answer', benign);
  exit();
}

main().catch((e) => {
  console.error('FAILED: ' + (e && e.stack ? e.stack : e));
  process.exit(1);
});
