// The guard activity's finding badges in Debian's headless Chromium: a real
// faultcp on loopback, a stand-in guard posting entries of each kind the guard
// writes (hashed as the guard hashes them), and the page showing each finding
// with the badge of its alert trigger, and none on a plain allowed request;
// an entry's reason (a WebAssembly plugin's) in its column.
'use strict';

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { FAULTCP, ARTIFACTS, fail, startFaultcp, call, makeChain, launchChromium, signedInPage, stopFaultcp, runMain, signUpWithAgent } =
  require('./faultcp_harness');

// Each row: what the guard writes, and the badge it must get ('' for none).
// The stand-in's requests are POSTs to api.example.com unless a row says otherwise.
const ROWS = [
  [{ kind: 'request', path: '/plain', verdict: 'allow' }, ''],
  [{ kind: 'request', path: '/blocked', verdict: 'deny', rule: 'no-exfil' }, 'blocked'],
  [{ kind: 'dlp', path: '/dlp', rule: 'dlp-redact' }, 'dlp'],
  [{ kind: 'response_threat', path: '/answer', rule: 'response-guard/injection' }, 'response_threat'],
  [{ kind: 'unverified-claim', path: '/claim', rule: 'unverified-claim' }, 'unverified-claim'],
  [{ kind: 'honeytoken', path: '/honey', verdict: 'deny', rule: 'honeytoken/aws_access_key' }, 'honeytoken'],
  [{ kind: 'integrity', method: 'MODIFY', host: '', path: '/work/CLAUDE.md', rule: 'integrity' }, 'integrity'],
  [{ kind: 'breaker', method: 'BREAKER', host: '', path: '/score-125', verdict: 'deny', rule: 'circuit-breaker' }, 'breaker'],
  [{ kind: 'request', path: '/budget', verdict: 'deny', rule: 'budget' }, 'budget'],
  [{ kind: 'request', path: '/admin/users', verdict: 'deny', rule: 'wasm:deny_admin.wasm', reason: 'POST to an /admin path' },
    'blocked'],
];

async function main() {
  if (!FAULTCP) fail('FAULTCP (the faultcp binary) is not set');
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fl-findings-dashboard-'));
  const { cp, base } = await startFaultcp(path.join(dir, 'cp.db'));
  let browser = null;
  try {
    const { signup, agent: guard } = await signUpWithAgent(base);
    const entry = makeChain();
    const posted = await call(base, 'POST', '/v1/guardrails/activity', guard,
      { entries: ROWS.map(([f]) => entry('alice@laptop-7', { method: 'POST', host: 'api.example.com', ...f })) });
    if (posted.stored !== ROWS.length || posted.flagged.length) fail('the activity did not land: ' + JSON.stringify(posted));

    browser = await launchChromium(dir);
    const { page, pageErrors, foreign } = await signedInPage(browser, base);
    await page.waitForFunction((n) => document.querySelectorAll('#activity tbody tr').length === n,
      { timeout: 10000 }, ROWS.length);

    // Each row's request text and its badge (class and text), as shown.
    const shown = await page.$$eval('#activity tbody tr', (trs) => trs.map((tr) => {
      const b = tr.querySelector('span.badge');
      return { request: tr.children[3].textContent, badge: b ? b.textContent : '', cls: b ? b.className : '',
        finding: tr.dataset.finding || '', reason: tr.children[9].textContent };
    }));
    for (const [f, want] of ROWS) {
      const r = shown.find((s) => s.request.endsWith(f.path));
      if (!r) fail('no row for ' + f.path + ' in ' + JSON.stringify(shown));
      if (r.badge !== want) fail(f.path + ': badge "' + r.badge + '", expected "' + want + '"');
      if (want && r.cls !== 'badge badge-' + want) fail(f.path + ': class "' + r.cls + '"');
      if (r.finding !== want) fail(f.path + ': data-finding "' + r.finding + '"');
      // The entry's reason (a WebAssembly plugin's) in its column; empty for the rest.
      if (r.reason !== (f.reason || '')) fail(f.path + ': reason "' + r.reason + '"');
    }
    // The badges are coloured by the stylesheet (not the default grey).
    const colours = await page.$$eval('#activity span.badge', (bs) => bs.map((b) => getComputedStyle(b).backgroundColor));
    if (colours.some((c) => c === 'rgb(84, 110, 122)')) fail('a badge has no colour of its own: ' + colours.join(', '));
    await page.screenshot({ path: path.join(ARTIFACTS, 'guard-findings.png'), fullPage: true });
    if (pageErrors.length) fail('page errors: ' + pageErrors.join('; '));
    if (foreign.length) fail('the page fetched from elsewhere: ' + foreign.join(', '));
    console.log('PASS: ' + (ROWS.length - 1) + ' findings shown with their badges and reasons (screenshot in ' + ARTIFACTS + ')');
  } finally {
    if (browser) await browser.close();
    await stopFaultcp(cp, dir);
  }
}

runMain(main);
