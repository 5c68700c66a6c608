// faultctl mcp-guard's finance pack between the official SDK's client and a
// broker server built with the SDK (broker_server.mjs, which appends every
// call that reaches it to a file): each limit denies, holds or allows, and
// nothing denied reaches the broker. Market hours are judged on the real
// clock here, against Node's own America/New_York time (Intl); the chosen
// instants are in the unit tests (mcp_finance_test.cpp).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { FAULTCTL, connect, faultctl, here, tempWorld, text, until } from "./harness.mjs";

const BROKER = path.join(here, "broker_server.mjs");

// A session through the guard to a broker of its own; `received()` is what reached it.
async function broker(t, w, flags) {
  const file = path.join(w.root, "received.jsonl");
  const s = await connect(t, w, ["--server-name", "broker", ...flags], [process.execPath, BROKER, file]);
  s.received = () =>
    fs.existsSync(file) ? fs.readFileSync(file, "utf8").trim().split("\n").filter(Boolean).map((l) => JSON.parse(l)) : [];
  return s;
}

const order = (s, quantity, limit_price, symbol = "AAPL") =>
  s.client.callTool({
    name: "place_stock_order",
    arguments: { symbol, side: "buy", quantity, order_type: "limit", limit_price },
  });

function heldCall(w) {
  const list = JSON.parse(faultctl(w, ["approvals", "list", "--json"]));
  const all = Array.isArray(list) ? list : list.approvals ?? [];
  return all.find((a) => a.host === "broker");
}

function activity(w) {
  return fs.readFileSync(w.log, "utf8").trim().split("\n").map((l) => JSON.parse(l));
}

// NYSE regular hours now, as Node's ICU time zone data has them.
function nyseOpenNow() {
  const parts = Object.fromEntries(
    new Intl.DateTimeFormat("en-US", {
      timeZone: "America/New_York",
      weekday: "short",
      hour: "2-digit",
      minute: "2-digit",
      hourCycle: "h23",
    })
      .formatToParts(new Date())
      .map((p) => [p.type, p.value]),
  );
  const minutes = Number(parts.hour) * 60 + Number(parts.minute);
  return !["Sat", "Sun"].includes(parts.weekday) && minutes >= 9 * 60 + 30 && minutes < 16 * 60;
}

test("--max-order-value: an order over the cap is denied and never reaches the broker; one under it is sent", async (t) => {
  const w = tempWorld(t);
  const s = await broker(t, w, ["--enforce", "--max-order-value", "5000"]);
  const denied = await order(s, 10, 600);
  assert.equal(denied.isError, true);
  assert.equal(text(denied), "blocked by faultline: max_order_value: the order's value 6000 is over the cap 5000");
  assert.deepEqual(s.received(), []);
  const sent = await order(s, 10, 100);
  assert.equal(text(sent), "order 1 accepted: buy 10 AAPL");
  assert.equal(s.received().length, 1);
  await s.client.close();
  assert.deepEqual(
    activity(w).map((l) => [l.path, l.verdict, l.rule]),
    [
      ["place_stock_order order_place symbol=AAPL side=buy qty=10 price=600 value=6000", "deny", "max_order_value"],
      ["place_stock_order order_place symbol=AAPL side=buy qty=10 price=100 value=1000", "allow", ""],
    ],
  );
  assert.match(faultctl(w, ["activity", "verify", w.log]), /intact/);
});

test("monitor: an order over the cap is a would-deny line and reaches the broker", async (t) => {
  const w = tempWorld(t);
  const s = await broker(t, w, ["--max-order-value", "5000"]);
  const r = await order(s, 10, 600);
  assert.equal(text(r), "order 1 accepted: buy 10 AAPL");
  assert.equal(s.received().length, 1);
  assert.match(s.stderr(), /would deny \(rule max_order_value: the order's value 6000 is over the cap 5000; monitor/);
});

test("--approve-over: the order is held, unsent, until a person decides", async (t) => {
  const w = tempWorld(t);
  const s = await broker(t, w, ["--enforce", "--approve-over", "1000"]);
  const first = order(s, 20, 100);
  const held = await until("the held order", () => heldCall(w));
  assert.match(held.path, /^place_stock_order /);
  assert.deepEqual(s.received(), []);
  faultctl(w, ["approvals", "deny", held.id]);
  const refused = await first;
  assert.equal(refused.isError, true);
  assert.match(text(refused), /^blocked by faultline: approve_over: denied by a person/);
  assert.deepEqual(s.received(), []);
  const second = order(s, 30, 100);
  const again = await until("the second held order", () => heldCall(w));
  faultctl(w, ["approvals", "approve", again.id]);
  assert.equal(text(await second), "order 1 accepted: buy 30 AAPL");
  assert.equal(s.received().length, 1);
  const small = await order(s, 5, 100);
  assert.equal(text(small), "order 2 accepted: buy 5 AAPL");
});

test("--daily-limit: the day's total is kept across a restart of the guard", async (t) => {
  const w = tempWorld(t);
  const flags = ["--enforce", "--daily-limit", "1000"];
  const before = await broker(t, w, flags);
  assert.equal(text(await order(before, 6, 100)), "order 1 accepted: buy 6 AAPL");
  await before.client.close();
  assert.ok(fs.existsSync(path.join(w.state, "mcp-finance-broker.json")), "no ledger in the state folder");
  const after = await broker(t, w, flags);
  const denied = await order(after, 6, 100);
  assert.equal(
    text(denied),
    "blocked by faultline: daily_limit: today's orders (UTC) with this one 1200 is over the daily limit 1000",
  );
  assert.equal(after.received().length, 1);
  assert.equal(text(await order(after, 4, 100)), "order 1 accepted: buy 4 AAPL");  // 1000: not over
});

test("--max-orders-per-hour: the order after N in the hour is denied", async (t) => {
  const w = tempWorld(t);
  const s = await broker(t, w, ["--enforce", "--max-orders-per-hour", "2"]);
  await order(s, 1, 10);
  await order(s, 1, 10);
  const third = await order(s, 1, 10);
  assert.equal(text(third), "blocked by faultline: max_orders_per_hour: 2 orders in the last hour, at most 2");
  assert.equal(s.received().length, 2);
});

test("--outlier-factor: an order over F x the session's median is held; monitor only flags it", async (t) => {
  const w = tempWorld(t);
  const s = await broker(t, w, ["--enforce", "--outlier-factor", "3", "--approve-timeout", "300ms"]);
  for (const q of [1, 2, 1]) await order(s, q, 100);
  const r = await order(s, 5, 100);
  assert.equal(r.isError, true);
  assert.match(
    text(r),
    /^blocked by faultline: outlier: no approval within the timeout: the order's value 500 is over 3 x the median 100 of this session's 3 orders/,
  );
  assert.equal(s.received().length, 3);
  const m = await broker(t, tempWorld(t), ["--outlier-factor", "3"]);
  for (const q of [1, 2, 1]) await order(m, q, 100);
  assert.equal(text(await order(m, 5, 100)), "order 4 accepted: buy 5 AAPL");
  assert.match(m.stderr(), /would hold for approval \(rule outlier: /);
});

test("--deny-account-danger: withdrawal and bank change denied, reads and cancels pass", async (t) => {
  const w = tempWorld(t);
  const s = await broker(t, w, ["--enforce", "--deny-account-danger"]);
  const wd = await s.client.callTool({ name: "withdraw_funds", arguments: { amount: 5000 } });
  assert.equal(text(wd), "blocked by faultline: account_danger: a withdrawal");
  const bank = await s.client.callTool({
    name: "update_bank_account",
    arguments: { routing_number: "021000021", account_number: "1" },
  });
  assert.equal(text(bank), "blocked by faultline: account_danger: a change of the account's bank_details");
  assert.deepEqual(s.received(), []);
  assert.equal(text(await s.client.callTool({ name: "get_account_info", arguments: {} })), "cash 100000");
  const cancel = await s.client.callTool({ name: "cancel_order_by_id", arguments: { order_id: "1" } });
  assert.equal(text(cancel), "cancel_order_by_id: done");
  assert.deepEqual(s.received().map((c) => c.name), ["get_account_info", "cancel_order_by_id"]);
  await s.client.close();
  assert.deepEqual(
    activity(w).map((l) => [l.path, l.verdict]),
    [
      ["withdraw_funds withdraw value=5000", "deny"],
      ["update_bank_account account_setting setting=bank_details", "deny"],
      ["get_account_info", "allow"],
      ["cancel_order_by_id order_cancel", "allow"],
    ],
  );
});

test("--market-hours: an order outside NYSE regular hours is held, inside it is sent", async (t) => {
  const w = tempWorld(t);
  const s = await broker(t, w, ["--enforce", "--market-hours", "--approve-timeout", "300ms"]);
  const open = nyseOpenNow();
  const r = await order(s, 1, 10);
  if (open) {
    assert.equal(text(r), "order 1 accepted: buy 1 AAPL");
  } else {
    assert.match(text(r), /^blocked by faultline: market_hours: no approval within the timeout: outside NYSE regular hours/);
    assert.deepEqual(s.received(), []);
  }
});

test("bad finance flags exit 2 naming the flag, and no server starts", () => {
  for (const [flag, value] of [
    ["--max-order-value", "-5"],
    ["--approve-over", "lots"],
    ["--daily-limit", "0"],
    ["--max-orders-per-hour", "1.5"],
    ["--outlier-factor", "0.5"],
  ]) {
    const r = spawnSync(FAULTCTL, ["mcp-guard", flag, value, "--", process.execPath, "-e", "process.exit(9)"], {
      encoding: "utf8",
    });
    assert.equal(r.status, 2, `${flag} ${value}: ${r.stderr}`);
    assert.match(r.stderr, new RegExp(`${flag} '${value.replace(".", "\\.")}'`));
  }
});

test("mcp-guard status: a broker server without an order value cap is weak", (t) => {
  const w = tempWorld(t);
  const home = path.join(w.root, "home");
  fs.mkdirSync(home);
  const guard = (...flags) => ({ command: "/usr/bin/faultctl", args: ["mcp-guard", ...flags] });
  fs.writeFileSync(
    path.join(w.files, ".mcp.json"),
    JSON.stringify({
      mcpServers: {
        alpaca: { command: "uvx", args: ["alpaca-mcp-server", "serve"] },
        enforcing: guard("--enforce", "--server-name", "alpaca", "--", "uvx", "alpaca-mcp-server"),
        monitor: guard("--inspect-actions", "--", "node", "my-server.js"),
        capped: guard("--enforce", "--finance-pack", "--", "uvx", "alpaca-mcp-server"),
        files: guard("--enforce", "--", "node", "fs.js"),
      },
    }),
  );
  const r = spawnSync(FAULTCTL, ["mcp-guard", "status", "--project", w.files], {
    env: { ...w.env, HOME: home, XDG_CONFIG_HOME: "" },
    encoding: "utf8",
  });
  assert.equal(r.status, 0, r.stderr);
  const verdict = (name) => r.stdout.match(new RegExp(`^  ${name}: (.*)$`, "m"))?.[1];
  assert.equal(verdict("alpaca"), "unguarded (stdio): install wraps it (a broker server: install -- --enforce --finance-pack)");
  assert.equal(verdict("enforcing"), "weak: a broker server with no order value cap (--max-order-value N or --finance-pack)");
  assert.match(verdict("monitor"), /^weak: a broker server in monitor: its orders are logged, none is capped/);
  assert.equal(verdict("capped"), "guarded: enforce, default allow, 0 tool rules, orders capped at 10000");
  assert.equal(verdict("files"), "weak: enforcing, but no rule and default allow: every call passes");
});
