// The guard's side of faultcp's dashboard in Debian's headless Chromium: a
// real faultcp on loopback, a stand-in guard speaking the guard routes (an
// agent token, activity batches hashed as the guard hashes them, a held
// request and its long poll), and the page driven as a person would: the held
// request appears, Approve makes the guard's waiting poll return "approve"
// within a second, new activity shows in under a second, usage per identity.
'use strict';

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { FAULTCP, ARTIFACTS, fail, startFaultcp, call, makeChain, launchChromium, signedInPage, stopFaultcp, runMain, signUpWithAgent } =
  require('./faultcp_harness');


async function main() {
  if (!FAULTCP) fail('FAULTCP (the faultcp binary) is not set');
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fl-guard-dashboard-'));
  const { cp, base } = await startFaultcp(path.join(dir, 'cp.db'));
  let browser = null;
  try {
    const { signup, agent: guard } = await signUpWithAgent(base);
    const entry = makeChain();
    const posted = await call(base, 'POST', '/v1/guardrails/activity', guard, { entries: [
      entry('alice@laptop-7', { host: 'github.com', path: '/acme/app' }),
      entry('alice@laptop-7', { method: 'POST', host: 'evil.example.com', path: '/upload', verdict: 'deny', rule: 'no-exfil' }),
      entry('alice@laptop-7', { method: 'POST', host: 'api.anthropic.com', path: '/v1/messages',
        llm: { model: 'claude-sonnet-4', in: 1200, out: 340, cache: 800, reasoning: 0 } }),
    ] });
    if (posted.stored !== 3 || posted.flagged.length) fail('the activity did not land cleanly: ' + JSON.stringify(posted));
    const held = await call(base, 'POST', '/v1/guardrails/approvals', guard, {
      request_id: 'r-1', identity: 'alice@laptop-7', method: 'POST', host: 'api.prod.example.com', path: '/v1/deploy',
      rule: 'prod-writes', reason: 'writes to prod need a person', expires_at: new Date(Date.now() + 120000).toISOString(),
    });

    browser = await launchChromium(dir);
    const { page, pageErrors, foreign } = await signedInPage(browser, base);
    const pendingRow = '#approvals tbody tr[data-id="' + held.id + '"][data-state="pending"]';
    await page.waitForSelector(pendingRow + ' button.approve', { timeout: 5000 });
    await page.waitForFunction(() => {
      const a = document.querySelector('#activity tbody').textContent;
      const u = document.querySelector('#usage tbody').textContent;
      return a.includes('evil.example.com') && a.includes('no-exfil') && u.includes('claude-sonnet-4') && u.includes('1200');
    }, { timeout: 5000 });
    await page.screenshot({ path: path.join(ARTIFACTS, 'guard-01-held.png'), fullPage: true });
    console.log('the held request, the activity and the usage are shown');

    // The guard waits on its long poll; a person presses Approve.
    const poll = (async () => {
      const r = await call(base, 'GET', '/v1/guardrails/approvals/' + held.id + '/decision?wait=30s', guard);
      return { r, at: Date.now() };
    })();
    // Awaited below; until then a failure of the page must not leave it
    // rejected unobserved (node would report it and hide the page's error).
    poll.catch(() => {});
    await new Promise((r) => setTimeout(r, 300));
    const clicked = Date.now();
    await page.click(pendingRow + ' button.approve');
    const { r: decision, at } = await poll;
    const waited = at - clicked;
    if (decision.decision !== 'approve') fail('the poll returned ' + JSON.stringify(decision));
    if (waited >= 1000) fail('the decision reached the waiting poll after ' + waited + ' ms');
    console.log('Approve reached the guard\'s waiting poll in ' + waited + ' ms');
    await page.waitForSelector('#approvals tbody tr[data-id="' + held.id + '"][data-state="approved"]', { timeout: 2000 });

    // New activity goes live in under a second.
    const sent = Date.now();
    await call(base, 'POST', '/v1/guardrails/activity', guard, { entries: [
      entry('alice@laptop-7', { method: 'POST', host: 'api.prod.example.com', path: '/v1/deploy', verdict: 'approve', rule: 'prod-writes' }),
    ] });
    await page.waitForFunction(() => document.querySelector('#activity tbody').textContent.includes('/v1/deploy'),
      { timeout: 3000, polling: 20 });
    const shown = Date.now() - sent;
    if (shown >= 1000) fail('new activity took ' + shown + ' ms to show');
    console.log('new activity shown in ' + shown + ' ms');
    await page.screenshot({ path: path.join(ARTIFACTS, 'guard-02-approved.png'), fullPage: true });

    const audit = await call(base, 'GET', '/v1/audit/export', signup.token);
    const approvedBy = audit.entries.find((e) => e.action === 'guardrail.approval.approve');
    if (!approvedBy || !approvedBy.actor.startsWith('user:')) fail('no audit entry names who approved: ' + JSON.stringify(approvedBy));
    if (!audit.entries.some((e) => e.action === 'guardrail.block')) fail('the block was not mirrored into the audit log');
    if (foreign.length) fail('the page fetched from elsewhere: ' + foreign.join(', '));
    if (pageErrors.length) fail('page errors: ' + pageErrors.join('; '));
    console.log('PASS: guard dashboard (screenshots in ' + ARTIFACTS + ')');
  } finally {
    if (browser) await browser.close();
    await stopFaultcp(cp, dir);
  }
}

runMain(main);
