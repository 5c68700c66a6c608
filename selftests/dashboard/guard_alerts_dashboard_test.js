// The guard's alert settings form in Debian's headless Chromium: a real
// faultcp on loopback and a loopback receiver. A person fills the form as a
// person does; each bad field (faultcp's 400) is shown beside that field and
// nothing is stored; a good one is saved and read back by the API; the test
// alert reaches the receiver signed with the secret the form generated; a
// rotated secret signs the next one (the old one no longer verifies), and a
// save with the secret left empty keeps it; a reload shows what is stored.
'use strict';

const crypto = require('node:crypto');
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const { FAULTCP, ARTIFACTS, fail, startFaultcp, call, launchChromium, signedInPage, stopFaultcp, runMain,
  signUpWithAgent } = require('./faultcp_harness');

// A loopback webhook receiver: every POST kept (headers and raw body), 200.
function startReceiver() {
  const got = [];
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      got.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(200, { 'Content-Type': 'text/plain' });
      res.end('ok');
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () =>
    resolve({ server, got, url: 'http://127.0.0.1:' + server.address().port + '/guard-hook' })));
}

// The n-th delivery (1-based), waited for up to 10 s.
async function delivery(got, n) {
  const until = Date.now() + 10000;
  while (got.length < n) {
    if (Date.now() > until) fail('the receiver got ' + got.length + ' deliveries, expected ' + n);
    await new Promise((r) => setTimeout(r, 50));
  }
  return got[n - 1];
}

// Whether `secret` signed the delivery (docs/control-plane.md "Webhooks").
function signedWith(d, secret) {
  const ts = d.headers['x-faultline-timestamp'];
  const want = 'sha256=' + crypto.createHmac('sha256', secret).update(ts + '.' + d.body).digest('hex');
  return d.headers['x-faultline-signature'] === want;
}

async function main() {
  if (!FAULTCP) fail('FAULTCP (the faultcp binary) is not set');
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fl-alerts-dashboard-'));
  const { cp, base } = await startFaultcp(path.join(dir, 'cp.db'));
  const receiver = await startReceiver();
  let browser = null;
  try {
    const { signup } = await signUpWithAgent(base);
    const stored = async () => (await call(base, 'GET', '/v1/guardrails/alerts', signup.token)).alerts;

    browser = await launchChromium(dir);
    const { page, pageErrors, foreign } = await signedInPage(browser, base, { height: 2400 });
    await page.waitForFunction(() => document.getElementById('alerts-state').textContent === 'Not set.',
      { timeout: 10000 });
    const triggers = await page.$$eval('#alerts-triggers tr', (trs) => trs.map((tr) => tr.dataset.trigger));
    if (triggers.join(',') !== 'blocked,dlp,response_threat,off-mission-action,unverified-claim,honeytoken,' +
      'integrity,breaker,budget') fail('the form lists the triggers ' + triggers.join(','));

    const setValue = async (sel, v) => {
      await page.$eval(sel, (el) => { el.value = ''; });
      await page.type(sel, v);
    };
    // Submits the form; the text of each field's error after faultcp answered.
    const submit = async (settled) => {
      await page.$eval('#alerts-status', (el) => { el.textContent = 'submitting'; });
      await page.$$eval('#alerts .field-error, #alerts-error', (es) => es.forEach((e) => { e.textContent = ''; }));
      await page.click('#alerts button[type=submit]');
      await page.waitForFunction(settled, { timeout: 10000 });
      return page.$$eval('#alerts .field-error, #alerts-error',
        (es) => Object.fromEntries(es.filter((e) => e.textContent).map((e) => [e.dataset.field || e.id, e.textContent])));
    };
    const errorShown = () => [...document.querySelectorAll('#alerts .field-error, #alerts-error')]
      .some((e) => e.textContent !== '');
    const only = (errors, field, words) => {
      const keys = Object.keys(errors);
      if (keys.length !== 1 || keys[0] !== field || !errors[field].includes(words))
        fail('expected only a ' + field + ' error with "' + words + '", got ' + JSON.stringify(errors));
    };

    // A URL that is not http(s): beside the URL, which is marked; nothing stored.
    await setValue('#alerts-url', 'ftp://hooks.example.com/guard');
    await page.click('#alerts-trigger-blocked');
    let errors = await submit(errorShown);
    only(errors, 'url', 'url: ');
    if (await page.$eval('#alerts-url', (e) => e.getAttribute('aria-invalid')) !== 'true')
      fail('the URL field is not marked invalid');
    if (await stored() !== null) fail('a bad URL stored settings');

    // The receiver's URL and a short secret: the URL's error goes, the secret's shows.
    await setValue('#alerts-url', receiver.url);
    await setValue('#alerts-secret', 'short');
    errors = await submit(errorShown);
    only(errors, 'secret', '16-256 characters');
    if (await page.$eval('#alerts-url', (e) => e.hasAttribute('aria-invalid'))) fail('the URL is still marked');

    // A generated secret; a per-trigger cooldown over a day: beside that trigger.
    await page.click('#alerts-rotate');
    const secret1 = await page.$eval('#alerts-secret', (e) => e.value);
    if (!/^[0-9a-f]{64}$/.test(secret1)) fail('the generated secret is ' + JSON.stringify(secret1));
    await page.click('#alerts-trigger-dlp');
    await setValue('#alerts-cooldown-dlp', '90000');
    errors = await submit(errorShown);
    only(errors, 'cooldowns.dlp', '0-86400');

    // A weekly digest at a time that is not one: beside the time.
    await setValue('#alerts-cooldown-dlp', '60');
    await page.select('#alerts-digest', 'weekly');
    if (await page.$eval('#alerts-weekday-label', (e) => e.hidden)) fail('the weekday is hidden for a weekly digest');
    await page.select('#alerts-digest-weekday', 'friday');
    await setValue('#alerts-digest-at', '25:00');
    errors = await submit(errorShown);
    only(errors, 'digest_at', 'HH:MM');
    if (await stored() !== null) fail('a refused form stored settings');

    // All good: saved, and the API reads back what the form said.
    await setValue('#alerts-digest-at', '08:30');
    errors = await submit(() => document.getElementById('alerts-status').textContent === 'Saved.' ||
      [...document.querySelectorAll('#alerts .field-error, #alerts-error')].some((e) => e.textContent !== ''));
    if (Object.keys(errors).length) fail('the good form was refused: ' + JSON.stringify(errors));
    let a = await stored();
    const want = { url: receiver.url, format: 'auto', sends_as: 'faultline', secret_set: true,
      triggers: ['blocked', 'dlp'], cooldowns: { blocked: 300, dlp: 60 }, digest: 'weekly', digest_at: '08:30',
      digest_weekday: 'friday' };
    for (const [k, v] of Object.entries(want))
      if (JSON.stringify(a[k]) !== JSON.stringify(v)) fail('stored ' + k + ' = ' + JSON.stringify(a[k]) + ', expected ' + JSON.stringify(v));
    if (await page.$eval('#alerts-secret', (e) => e.value) !== '') fail('the secret stays in the form after a save');
    if (!(await page.$eval('#alerts-secret-state', (e) => e.textContent)).includes('A secret is set'))
      fail('the form does not say a secret is set');

    // The test alert, signed with the generated secret.
    const test = async () => {
      await page.$eval('#alerts-status', (el) => { el.textContent = ''; });
      await page.click('#alerts-test');
      await page.waitForFunction(() => /^Test alert queued \(delivery \d+\)\.$/.test(
        document.getElementById('alerts-status').textContent), { timeout: 10000 });
    };
    await test();
    let d = await delivery(receiver.got, 1);
    if (d.headers['x-faultline-trigger'] !== 'test') fail('the test alert came as ' + d.headers['x-faultline-trigger']);
    if (!signedWith(d, secret1)) fail('the test alert is not signed with the secret the form generated');

    // Rotation: a new secret signs the next alert, the old one no longer does.
    await page.click('#alerts-rotate');
    const secret2 = await page.$eval('#alerts-secret', (e) => e.value);
    if (secret2 === secret1 || !/^[0-9a-f]{64}$/.test(secret2)) fail('the rotated secret is ' + secret2);
    await submit(() => document.getElementById('alerts-status').textContent === 'Saved.');
    await test();
    d = await delivery(receiver.got, 2);
    if (!signedWith(d, secret2) || signedWith(d, secret1)) fail('the alert after the rotation is not signed with the new secret only');

    // A save with the secret left empty keeps it.
    await page.click('#alerts-trigger-honeytoken');
    await submit(() => document.getElementById('alerts-status').textContent === 'Saved.');
    a = await stored();
    if (JSON.stringify(a.triggers) !== '["blocked","dlp","honeytoken"]') fail('triggers after the third save: ' + a.triggers);
    await test();
    d = await delivery(receiver.got, 3);
    if (!signedWith(d, secret2)) fail('a save without a secret did not keep the stored one');

    // A reload shows what is stored.
    await page.reload({ waitUntil: 'load' });
    await page.waitForFunction((url) => document.getElementById('alerts-url').value === url, { timeout: 10000 },
      receiver.url);
    const form = await page.evaluate(() => ({
      checked: [...document.querySelectorAll('#alerts-triggers input[type=checkbox]')].filter((c) => c.checked)
        .map((c) => c.dataset.trigger),
      dlp: document.getElementById('alerts-cooldown-dlp').value,
      digest: document.getElementById('alerts-digest').value,
      at: document.getElementById('alerts-digest-at').value,
      weekday: document.getElementById('alerts-digest-weekday').value,
      state: document.getElementById('alerts-state').textContent,
    }));
    if (form.checked.join(',') !== 'blocked,dlp,honeytoken' || form.dlp !== '60' || form.digest !== 'weekly' ||
        form.at !== '08:30' || form.weekday !== 'friday' || !form.state.includes('next digest'))
      fail('the reloaded form shows ' + JSON.stringify(form));
    await page.screenshot({ path: path.join(ARTIFACTS, 'guard-alerts.png'), fullPage: true });
    if (pageErrors.length) fail('page errors: ' + pageErrors.join('; '));
    if (foreign.length) fail('the page fetched from elsewhere: ' + foreign.join(', '));
    console.log('PASS: 4 bad fields shown beside each field, nothing stored; saved, tested, rotated, kept, reloaded ' +
      '(screenshot in ' + ARTIFACTS + ')');
  } finally {
    if (browser) await browser.close();
    receiver.server.close();
    await stopFaultcp(cp, dir);
  }
}

runMain(main);
