// faultcp's dashboard: signs in with POST /v1/auth/login, keeps the session
// token in this tab's sessionStorage, and redraws agents, experiments, the kill
// switch and the audit trail from the REST API every second, and the guard's
// approvals, activity, usage and MCP servers every half second (a held request
// waits for a person: it shows, and its activity goes live, in under a second);
// the guard's alert settings are a form, loaded at sign-in and after a save.
// Every value is written as text (textContent), never as markup.
'use strict';

const $ = (id) => document.getElementById(id);
let token = sessionStorage.getItem('faultcp-token') || '';
let timer = null;
let guardTimer = null;

async function api(method, path, body) {
  const headers = { Authorization: 'Bearer ' + token };
  const init = { method, headers };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const r = await fetch(path, init);
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch (e) { json = null; }
  if (r.status === 401) signOut();
  if (!r.ok) {
    const err = new Error((json && json.error) || r.status + ' ' + r.statusText);
    err.status = r.status;
    err.field = (json && json.field) || '';  // the body's field a 400 names
    throw err;
  }
  return json;
}

function row(cells) {
  const tr = document.createElement('tr');
  for (const c of cells) {
    const td = document.createElement('td');
    if (c instanceof Node) td.appendChild(c); else td.textContent = c === null || c === undefined ? '' : String(c);
    tr.appendChild(td);
  }
  return tr;
}

// Rows drawn last, per table, as markup. A table whose rows did not change is
// left alone: replacing a button between a person's press and release loses the
// click (the release lands on a new node), and the tables redraw twice a second.
const drawn = new Map();

function fill(tableId, rows) {
  const body = $(tableId).querySelector('tbody');
  const markup = rows.map((r) => r.outerHTML).join('');
  if (drawn.get(tableId) === markup && body.childElementCount === rows.length) return;
  body.replaceChildren(...rows);
  drawn.set(tableId, markup);
}

function ago(ms) {
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  return s < 60 ? s + ' s ago' : Math.round(s / 60) + ' min ago';
}

function timeLeft(e) {
  if (e.status !== 'running' || !e.started_ms) return '';
  const left = e.started_ms + (e.spec.duration_sec || 0) * 1000 - Date.now();
  return Math.max(0, Math.round(left / 1000)) + ' s';
}

function counters(e) {
  const c = e.record && e.record.counters;
  if (!c || typeof c !== 'object') return '';
  return Object.entries(c).map(([k, v]) => k + '=' + v).join(' ');
}

async function refresh() {
  try {
    const [agents, experiments, kill, audit] = await Promise.all([
      api('GET', '/v1/agents'), api('GET', '/v1/experiments?limit=50'), api('GET', '/v1/kill'),
      api('GET', '/v1/audit/export'),
    ]);
    const hosts = new Map(agents.agents.map((a) => [a.id, a.hostname]));
    fill('agents', agents.agents.map((a) => row([
      a.id, a.hostname, a.kernel, a.version,
      Object.entries(a.features || {}).filter(([, v]) => v === true).map(([k]) => k).join(', '),
      ago(a.last_seen_ms), a.killed ? 'engaged' : '',
    ])));
    const select = $('start-agent');
    const chosen = select.value;
    select.replaceChildren(...agents.agents.map((a) => {
      const o = document.createElement('option');
      o.value = a.id;
      o.textContent = a.id + ' ' + a.hostname;
      return o;
    }));
    if (chosen) select.value = chosen;

    fill('experiments', experiments.experiments.map((e) => {
      const state = document.createElement('span');
      state.className = 'state state-' + e.status;
      state.textContent = e.status;
      let abort = '';
      if (['queued', 'dispatched', 'running'].includes(e.status)) {
        abort = document.createElement('button');
        abort.textContent = 'Abort';
        abort.className = 'abort';
        abort.onclick = () => api('POST', '/v1/experiments/' + e.id + '/abort').then(refresh, showError);
      }
      const tr = row([e.id, hosts.get(e.agent_id) || e.agent_id, e.spec.kind, state, timeLeft(e), counters(e),
        (e.record && e.record.verdict) || '', e.detail, abort]);
      tr.dataset.id = e.id;
      tr.dataset.status = e.status;
      return tr;
    }));

    const ks = $('kill-state');
    ks.textContent = kill.engaged ? 'engaged' : 'released';
    ks.className = kill.engaged ? 'engaged' : '';
    $('kill').hidden = kill.engaged;
    $('release').hidden = !kill.engaged;

    const entries = audit.entries.slice(-50).reverse();
    fill('audit', entries.map((a) => row([a.seq, new Date(a.at_ms).toISOString(), a.actor, a.action, a.object])));
    $('audit-verify').textContent = audit.entries.length + ' entries, head ' + String(audit.head).slice(0, 12);
  } catch (err) {
    showError(err);
  }
}

async function refreshGuard() {
  try {
    const [approvals, activity, usage, mcp] = await Promise.all([
      api('GET', '/v1/guardrails/approvals?limit=50'), api('GET', '/v1/guardrails/activity?limit=50'),
      api('GET', '/v1/guardrails/usage?window=7d'), api('GET', '/v1/guardrails/mcp-servers?window=7d'),
    ]);
    drawGuard(approvals, activity, usage);
    drawMcpServers(mcp);
  } catch (err) {
    showError(err);
  }
}

// The guard: held requests with Approve/Deny while pending, the newest
// activity entries, and LLM usage per identity and model.
function drawGuard(approvals, activity, usage) {
  $('approvals-pending').textContent = String(approvals.pending);
  fill('approvals', approvals.approvals.map((a) => {
    const buttons = document.createElement('span');
    if (a.state === 'pending') {
      for (const [label, verb] of [['Approve', 'approve'], ['Deny', 'deny']]) {
        const b = document.createElement('button');
        b.textContent = label;
        b.className = verb;
        b.onclick = () => api('POST', '/v1/guardrails/approvals/' + a.id + '/' + verb, {}).then(refreshGuard, showError);
        buttons.appendChild(b);
      }
    }
    const tr = row([a.id, a.identity, a.method + ' ' + a.host + a.path, a.rule, a.reason,
      new Date(a.expires_ms).toISOString(), a.state + (a.decided_by ? ' by ' + a.decided_by : ''), buttons]);
    tr.dataset.id = a.id;
    tr.dataset.state = a.state;
    return tr;
  }));
  fill('activity', activity.entries.map((e) => {
    const llm = e.llm ? e.llm.model + ' in=' + e.llm.in + ' out=' + e.llm.out : '';
    // The finding's badge: the alert trigger faultcp gives the entry (none for a plain allow).
    let badge = '';
    if (e.finding) {
      badge = document.createElement('span');
      badge.className = 'badge badge-' + e.finding;
      badge.textContent = e.finding;
    }
    // An MCP entry's path is a tool's name, not a URL path: apart from its server.
    const request = e.method + ' ' + e.host + (e.kind.startsWith('mcp') ? ' ' : '') + e.path;
    const tr = row([e.ts, e.identity, e.seq, request, e.verdict, badge, e.rule, llm,
      e.chain === 'ok' ? 'ok' : e.chain + ': ' + e.chain_detail, e.reason || '']);
    tr.dataset.verdict = e.verdict;
    if (e.finding) tr.dataset.finding = e.finding;
    tr.className = e.chain === 'ok' ? '' : 'flagged';
    return tr;
  }));
  fill('usage', usage.usage.map((u) => row([u.identity, u.model, u.calls, u.input_tokens, u.output_tokens,
    u.cache_tokens])));
}

// The MCP server inventory: a row per server (its totals), then a row per tool.
function drawMcpServers(mcp) {
  const rows = [];
  const cells = (server, tool, t) => [server, tool, t.calls, t.denied, t.held, t.findings,
    t.last_seen_ms ? new Date(t.last_seen_ms).toISOString() : '', t.identities.join(', ')];
  for (const s of mcp.servers) {
    const tr = row(cells(s.server, s.tools.length + ' tool' + (s.tools.length === 1 ? '' : 's'), s));
    tr.className = 'mcp-server';
    tr.dataset.server = s.server;
    rows.push(tr);
    for (const t of s.tools) {
      const tool = row(cells('', t.tool, t));
      tool.dataset.server = s.server;
      tool.dataset.tool = t.tool;
      rows.push(tool);
    }
  }
  fill('mcp-servers', rows);
}

// The guard's alert settings: a form over GET|PUT /v1/guardrails/alerts,
// loaded at sign-in and after a save (never redrawn under a person's typing).
// faultcp validates; a 400 names the field, and its message is shown beside
// that field (nothing was stored).
const ALERT_TRIGGERS = [
  ['blocked', 'a request denied'], ['dlp', 'a DLP finding'], ['response_threat', 'a threat in an LLM answer'],
  ['off-mission-action', 'an off-mission action'], ['unverified-claim', 'an unverified completion claim'],
  ['honeytoken', 'a honeytoken used'], ['integrity', 'a watched file changed'], ['breaker', 'the circuit breaker'],
  ['budget', 'the LLM budget refused a call'],
];
const DEFAULT_COOLDOWN = 300;

function buildAlertTriggers() {
  const body = $('alerts-triggers').querySelector('tbody');
  body.replaceChildren(...ALERT_TRIGGERS.map(([name, what]) => {
    const on = document.createElement('input');
    on.type = 'checkbox';
    on.id = 'alerts-trigger-' + name;
    on.dataset.trigger = name;
    const label = document.createElement('label');
    label.htmlFor = on.id;
    label.textContent = name + ' (' + what + ')';
    const cooldown = document.createElement('input');
    cooldown.type = 'number';
    cooldown.min = '0';
    cooldown.max = '86400';
    cooldown.placeholder = String(DEFAULT_COOLDOWN);
    cooldown.id = 'alerts-cooldown-' + name;
    cooldown.setAttribute('aria-label', 'cooldown of ' + name + ' (seconds)');
    const error = document.createElement('span');
    error.className = 'error field-error';
    error.dataset.field = 'cooldowns.' + name;
    const tr = row([on, label, cooldown, error]);
    tr.dataset.trigger = name;
    return tr;
  }));
}

function clearAlertErrors() {
  for (const e of document.querySelectorAll('#alerts .field-error')) e.textContent = '';
  for (const e of document.querySelectorAll('#alerts [aria-invalid]')) e.removeAttribute('aria-invalid');
  $('alerts-error').textContent = '';
}

// The element a field's error is shown in, and the input it marks.
function alertErrorPlace(field) {
  const inputs = { url: 'alerts-url', format: 'alerts-format', secret: 'alerts-secret', digest: 'alerts-digest',
    digest_at: 'alerts-digest-at', digest_weekday: 'alerts-digest-weekday' };
  if (inputs[field]) return [document.querySelector('#alerts [data-field="' + field + '"]'), $(inputs[field])];
  let m = /^cooldowns\.(.+)$/.exec(field);
  if (m && ALERT_TRIGGERS.some(([t]) => t === m[1]))
    return [document.querySelector('#alerts [data-field="cooldowns.' + m[1] + '"]'), $('alerts-cooldown-' + m[1])];
  if (field === 'triggers' || field === 'cooldown_sec' || /^triggers\[/.test(field))
    return [$('alerts-triggers-error'), null];
  return [$('alerts-error'), null];
}

function showAlertError(err) {
  const [place, input] = alertErrorPlace(err.field || '');
  place.textContent = err.message;
  if (input) input.setAttribute('aria-invalid', 'true');
}

function drawAlerts(a) {
  if (!a) {
    $('alerts-state').textContent = 'Not set.';
    $('alerts-secret-state').textContent = 'Required (16-256 characters) unless the alerts go to Slack.';
    return;
  }
  $('alerts-url').value = a.url;
  $('alerts-format').value = a.format;
  $('alerts-secret').value = '';
  $('alerts-secret-state').textContent = a.secret_set
    ? 'A secret is set (never shown again): leave this empty to keep it.'
    : 'No secret is set.';
  for (const [name] of ALERT_TRIGGERS) {
    $('alerts-trigger-' + name).checked = a.triggers.includes(name);
    const c = a.cooldowns[name];
    $('alerts-cooldown-' + name).value = c === undefined ? '' : String(c);
  }
  $('alerts-digest').value = a.digest;
  $('alerts-digest-at').value = a.digest_at;
  $('alerts-digest-weekday').value = a.digest_weekday;
  $('alerts-weekday-label').hidden = a.digest !== 'weekly';
  $('alerts-state').textContent = 'Sent as ' + a.sends_as + ' to ' + a.url + '; ' +
    (a.triggers.length ? a.triggers.join(', ') : 'no triggers (a digest only)') +
    (a.next_digest ? '; next digest ' + a.next_digest : '') + '. Set by ' + a.updated_by + ' at ' +
    new Date(a.updated_ms).toISOString() + '.';
}

async function loadAlerts() {
  try {
    drawAlerts((await api('GET', '/v1/guardrails/alerts')).alerts);
  } catch (err) {
    $('alerts-error').textContent = err.message;
  }
}

// The PUT body the form says. An empty secret keeps the stored one; an empty
// cooldown is the default; the weekday only for a weekly digest.
function alertsBody() {
  const body = { url: $('alerts-url').value.trim(), format: $('alerts-format').value, triggers: [], cooldowns: {} };
  const secret = $('alerts-secret').value;
  if (secret !== '') body.secret = secret;
  for (const [name] of ALERT_TRIGGERS) {
    if (!$('alerts-trigger-' + name).checked) continue;
    body.triggers.push(name);
    const c = $('alerts-cooldown-' + name).value.trim();
    if (c !== '') body.cooldowns[name] = /^-?\d+$/.test(c) ? Number(c) : c;  // faultcp says what is wrong
  }
  body.digest = $('alerts-digest').value;
  body.digest_at = $('alerts-digest-at').value.trim();
  if (body.digest === 'weekly') body.digest_weekday = $('alerts-digest-weekday').value;
  return body;
}

// 32 random bytes as hex: a secret to paste into the receiver, stored on save.
function newAlertSecret() {
  const bytes = new Uint8Array(32);
  crypto.getRandomValues(bytes);
  $('alerts-secret').value = Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
  $('alerts-secret-state').textContent = 'A new secret: give it to the receiver; it replaces the stored one on save.';
}

function wireAlerts() {
  buildAlertTriggers();
  $('alerts-digest').addEventListener('change', () => {
    $('alerts-weekday-label').hidden = $('alerts-digest').value !== 'weekly';
  });
  $('alerts-rotate').addEventListener('click', newAlertSecret);
  $('alerts').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearAlertErrors();
    $('alerts-status').textContent = '';
    try {
      const saved = await api('PUT', '/v1/guardrails/alerts', alertsBody());
      drawAlerts(saved.alerts);
      $('alerts-status').textContent = 'Saved.';
    } catch (err) {
      showAlertError(err);
    }
  });
  $('alerts-test').addEventListener('click', async () => {
    clearAlertErrors();
    $('alerts-status').textContent = '';
    try {
      const sent = await api('POST', '/v1/guardrails/alerts/test', {});
      $('alerts-status').textContent = 'Test alert queued (delivery ' + sent.delivery + ').';
    } catch (err) {
      showAlertError(err);
    }
  });
}

function showError(err) {
  $('start-error').textContent = err.message;
}

function signedIn(who) {
  $('signin-view').hidden = true;
  $('app').hidden = false;
  $('signout').hidden = false;
  $('whoami').textContent = who || '';
  refresh();
  refreshGuard();
  loadAlerts();
  timer = setInterval(refresh, 1000);
  guardTimer = setInterval(refreshGuard, 500);
}

function signOut() {
  token = '';
  sessionStorage.removeItem('faultcp-token');
  if (timer) clearInterval(timer);
  if (guardTimer) clearInterval(guardTimer);
  $('app').hidden = true;
  $('signin-view').hidden = false;
  $('signout').hidden = true;
}

$('signin').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  $('signin-error').textContent = '';
  const r = await fetch('/v1/auth/login', {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ email: $('email').value, password: $('password').value }),
  });
  const j = await r.json().catch(() => ({}));
  if (!r.ok) {
    $('signin-error').textContent = j.error || 'sign-in failed';
    return;
  }
  token = j.token;
  sessionStorage.setItem('faultcp-token', token);
  signedIn($('email').value);
});

$('signout').addEventListener('click', signOut);
wireAlerts();

$('start').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  $('start-error').textContent = '';
  const kind = $('start-kind').value;
  const spec = { kind, target: $('start-target').value, duration_sec: Number($('start-duration').value) };
  if (kind === 'latency') spec.delay_ms = Number($('start-delay').value);
  if (['loss', 'corrupt', 'duplicate', 'flowdrop'].includes(kind)) spec.percent = Number($('start-percent').value);
  try {
    await api('POST', '/v1/experiments', { agent_id: Number($('start-agent').value), spec });
    refresh();
  } catch (err) {
    showError(err);
  }
});

$('kill').addEventListener('click', async () => {
  if (!confirm('Stop every experiment of this workspace and start nothing new until released?')) return;
  try {
    await api('POST', '/v1/kill');
  } catch (err) {
    showError(err);
  }
  refresh();
});

$('release').addEventListener('click', async () => {
  if (!confirm('Release the kill switch? Queued experiments may start.')) return;
  await api('DELETE', '/v1/kill').catch(showError);
  refresh();
});

if (token) signedIn('');
