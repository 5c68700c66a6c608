// faultcp's dashboard in Debian's headless Chromium (puppeteer-core, no
// browser download): a real faultcp on loopback with a private SQLite file, a
// test agent speaking the agent REST API (enrollment token, long poll, events),
// and the page driven as a person would: sign in, see the agent and its kernel
// features, start an experiment, see it running with its time left, press the
// kill switch, confirm, see it cancelled. Screenshots go to $ARTIFACTS.
'use strict';

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { FAULTCP, ARTIFACTS, EMAIL, PASSWORD, fail, startFaultcp, call, launchChromium, signedInPage, stopFaultcp, runMain } =
  require('./faultcp_harness');


// The agent: polls for work, reports "running" with counters, confirms stops.
function runAgent(base, id, token, log) {
  let stopped = false;
  const done = (async () => {
    while (!stopped) {
      let next;
      try {
        next = await call(base, 'GET', '/v1/agents/' + id + '/next', token);
      } catch (e) {
        if (!stopped) log.push('poll error: ' + e.message);
        await new Promise((r) => setTimeout(r, 200));
        continue;
      }
      for (const s of next.stop) {
        log.push('stop ' + s);
        await call(base, 'POST', '/v1/agents/' + id + '/events', token, { experiment_id: s, type: 'stopped' });
      }
      if (next.experiment) {
        log.push('run ' + next.experiment.id);
        await call(base, 'POST', '/v1/agents/' + id + '/events', token, {
          experiment_id: next.experiment.id, type: 'running',
          record: { counters: { packets_delayed: 42 }, verdict: 'pending' },
        });
      }
    }
  })();
  return { stop: () => { stopped = true; return done; } };
}

async function main() {
  if (!FAULTCP) fail('FAULTCP (the faultcp binary) is not set');
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fl-dashboard-'));
  const { cp, base } = await startFaultcp(path.join(dir, 'db', 'cp.db'), ['--poll-timeout-ms', '2000']);
  let browser = null;
  let agent = null;
  try {
    const signup = await call(base, 'POST', '/v1/auth/signup', '', { email: EMAIL, password: PASSWORD, workspace: 'ops' });
    const enroll = await call(base, 'POST', '/v1/tokens', signup.token, { kind: 'enrollment', name: 'fleet' });
    const reg = await call(base, 'POST', '/v1/agents/register', enroll.token, {
      hostname: 'web-1', kernel: '6.1.0-18-amd64', instance_id: 'i-0abc', device: 'eth0', version: '0.1',
      features: { tcx: true, bpf_lsm: true, netkit: false },
    });
    const agentLog = [];
    agent = runAgent(base, reg.agent_id, reg.token, agentLog);

    browser = await launchChromium(dir);
    let dialogs = 0;
    const { page, pageErrors: consoleErrors, foreign } = await signedInPage(browser, base, {
      height: 1000,
      setup: (p) => p.on('dialog', async (d) => { dialogs += 1; await d.accept(); }),
    });
    await page.waitForFunction(() => {
      const t = document.querySelector('#agents tbody');
      return t && t.textContent.includes('web-1') && t.textContent.includes('tcx') && t.textContent.includes('6.1.0-18-amd64');
    }, { timeout: 10000 });
    const features = await page.$eval('#agents tbody', (t) => t.textContent);
    if (features.includes('netkit')) fail('a feature the kernel lacks was shown as present: ' + features);
    await page.screenshot({ path: path.join(ARTIFACTS, '01-signed-in.png'), fullPage: true });
    console.log('signed in; the agent and its kernel features are listed');

    await page.select('#start-agent', String(reg.agent_id));
    await page.select('#start-kind', 'latency');
    await page.$eval('#start-duration', (e) => { e.value = '300'; });
    await page.click('#start button[type=submit]');
    await page.waitForFunction(() => {
      const r = document.querySelector('#experiments tbody tr[data-status="running"]');
      return r && /\d+ s/.test(r.children[4].textContent) && r.children[5].textContent.includes('packets_delayed=42');
    }, { timeout: 15000 });
    const running = await page.$eval('#experiments tbody tr[data-status="running"]', (r) => r.textContent);
    await page.screenshot({ path: path.join(ARTIFACTS, '02-running.png'), fullPage: true });
    console.log('experiment running: ' + running);

    await page.click('#kill');
    await page.waitForFunction(() => {
      const r = document.querySelector('#experiments tbody tr');
      return r && r.dataset.status === 'cancelled' && document.querySelector('#kill-state').textContent === 'engaged';
    }, { timeout: 10000 });
    if (dialogs !== 1) fail('the kill switch did not ask for confirmation (dialogs: ' + dialogs + ')');
    await page.waitForFunction(() => document.querySelector('#audit tbody').textContent.includes('kill.engage'),
      { timeout: 5000 });
    await page.screenshot({ path: path.join(ARTIFACTS, '03-killed.png'), fullPage: true });
    console.log('kill switch engaged from the page; the experiment is cancelled');

    // The agent heard the stop through its long poll.
    const until = Date.now() + 5000;
    while (!agentLog.some((l) => l.startsWith('stop ')) && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
    if (!agentLog.some((l) => l.startsWith('stop '))) fail('the agent was never told to stop: ' + agentLog.join(', '));
    if (foreign.length) fail('the page fetched from elsewhere: ' + foreign.join(', '));
    if (consoleErrors.length) fail('page errors: ' + consoleErrors.join('; '));
    console.log('PASS: dashboard (screenshots in ' + ARTIFACTS + ')');
  } finally {
    if (browser) await browser.close();
    if (agent) agent.stop();
    await stopFaultcp(cp, dir);
  }
}

runMain(main);
