// The official SDKs (@anthropic-ai/sdk, openai) at their default retries
// through `faultctl guard --enforce` with a deny rule for the model host: each
// must raise its permission error class (403), after exactly one attempt (the
// denial's x-should-retry: false), and nothing may reach the stand-in (the
// C++ test counts its requests). Node 20's fetch ignores HTTP_PROXY, as an
// agent's would without a proxy agent: the SDKs get a fetch that sends
// absolute-form requests to the proxy the guard set, as a proxy agent does.
// Prints one "ok ..." line per check; exits 1 if any failed.
//
//   node guard_sdk_test.js BASE_URL     (the stand-in, e.g. http://127.0.0.1:40111)
'use strict';
const {makeProxyFetch} = require('./proxy_fetch');
const {guardedArgs, makeChecks} = require('./sdk_check');
const Anthropic = require('@anthropic-ai/sdk');
const OpenAI = require('openai');

const {args: [base], proxy} = guardedArgs('guard_sdk_test.js', ['BASE_URL']);

const {check, exit} = makeChecks();

// A fetch through the HTTP proxy: the request line carries the whole URL.
let attempts = 0;
const proxyFetch = makeProxyFetch(proxy, {onAttempt: () => attempts++});

async function main() {
  attempts = 0;
  const anthropic = new Anthropic({apiKey: 'test-key', baseURL: base, fetch: proxyFetch});
  try {
    await anthropic.messages.create({
      model: 'claude-test',
      max_tokens: 16,
      messages: [{role: 'user', content: 'hi'}],
    });
    check(false, 'anthropic: the denied call raises');
  } catch (e) {
    check(e instanceof Anthropic.PermissionDeniedError, 'anthropic: PermissionDeniedError', e && e.constructor.name);
    check(e.status === 403, 'anthropic: status 403', e.status);
    check(
        e.error && e.error.error && e.error.error.type === 'permission_error', 'anthropic: permission_error envelope',
        e.error);
    check(attempts === 1, 'anthropic: exactly one attempt at default retries', attempts);
  }

  attempts = 0;
  const openai = new OpenAI({apiKey: 'test-key', baseURL: base + '/v1', fetch: proxyFetch});
  try {
    await openai.chat.completions.create({model: 'gpt-test', messages: [{role: 'user', content: 'hi'}]});
    check(false, 'openai: the denied call raises');
  } catch (e) {
    check(e instanceof OpenAI.PermissionDeniedError, 'openai: PermissionDeniedError', e && e.constructor.name);
    check(e.status === 403, 'openai: status 403', e.status);
    check(e.code === 'policy_denied', 'openai: code policy_denied', e.code);
    check(attempts === 1, 'openai: exactly one attempt at default retries', attempts);
  }
  exit();
}

main().catch((e) => {
  console.error('FAILED: ' + (e && e.stack ? e.stack : e));
  process.exit(1);
});
