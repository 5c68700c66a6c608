// Drives faultd's Toxiproxy-compatible API with toxiproxy-node-client, the
// official Node.js client, exactly as a test suite written for Toxiproxy would,
// against a real HTTP server behind the proxy. Prints one "ok ..." line per
// check; exits 1 at the first failure with what was expected and what came.
//
//   node client_test.js API_URL        e.g. http://127.0.0.1:18474
"use strict";
const http = require("node:http");
const net = require("node:net");
const { Toxiproxy, ToxiproxyError } = require("toxiproxy-node-client");

const api = process.argv[2];
if (!api) {
  console.error("usage: node client_test.js API_URL");
  process.exit(2);
}

function check(cond, what, detail) {
  if (!cond) {
    console.error(`FAILED: ${what}${detail === undefined ? "" : ": " + JSON.stringify(detail)}`);
    process.exit(1);
  }
  console.log(`ok ${what}`);
}

// One GET through addr ("host:port"); resolves with the elapsed milliseconds and the body.
function get(addr) {
  const [host, port] = [addr.slice(0, addr.lastIndexOf(":")), Number(addr.slice(addr.lastIndexOf(":") + 1))];
  return new Promise((resolve, reject) => {
    const start = process.hrtime.bigint();
    const req = http.get({ host, port, path: "/", agent: false }, (res) => {
      let body = "";
      res.on("data", (c) => (body += c));
      res.on("end", () => resolve({ ms: Number(process.hrtime.bigint() - start) / 1e6, body }));
    });
    req.on("error", reject);
    req.setTimeout(5000, () => req.destroy(new Error("timeout")));
  });
}

async function median(addr, n) {
  const times = [];
  for (let i = 0; i < n; i++) times.push((await get(addr)).ms);
  times.sort((a, b) => a - b);
  return times[Math.floor(n / 2)];
}

async function expectStatus(promise, status, what) {
  try {
    await promise;
  } catch (e) {
    check(e instanceof ToxiproxyError && e.message.endsWith(`status code ${status}`), what, e.message);
    return;
  }
  check(false, what, "the call succeeded");
}

async function main() {
  const upstream = http.createServer((req, res) => res.end("hello from upstream\n"));
  await new Promise((r) => upstream.listen(0, "127.0.0.1", r));
  const upstreamAddr = `127.0.0.1:${upstream.address().port}`;
  const toxiproxy = new Toxiproxy(api);

  const version = await toxiproxy.getVersion();
  check(JSON.parse(version).version.startsWith("2."), "GET /version answers a Toxiproxy 2.x API level", version);

  const proxy = await toxiproxy.createProxy({ name: "web", listen: "127.0.0.1:0", upstream: upstreamAddr });
  check(proxy.name === "web" && proxy.enabled === true, "createProxy", proxy.toJson());
  check(/^127\.0\.0\.1:[1-9][0-9]*$/.test(proxy.listen), "the proxy shows the port it listens on", proxy.listen);
  const direct = await get(proxy.listen);
  check(direct.body === "hello from upstream\n", "a request through the proxy reaches the server", direct.body);
  await expectStatus(toxiproxy.createProxy({ name: "web", listen: "127.0.0.1:0", upstream: upstreamAddr }), 409,
                     "a second proxy of the same name is 409");

  const base = await median(proxy.listen, 5);
  const toxic = await proxy.addToxic({ type: "latency", stream: "downstream", toxicity: 1,
                                       attributes: { latency: 200, jitter: 0 } });
  check(toxic.name === "latency_downstream" && toxic.attributes.latency === 200, "addToxic latency", toxic.toJson());
  const slow = await median(proxy.listen, 5);
  check(slow >= 200 && slow - base <= 200 * 1.05 + 10, "200 ms of latency is added (5 requests, median)",
        { base, slow });

  const changed = await toxic.update({ attributes: { latency: 50 } });
  check(changed.attributes.latency === 50 && changed.attributes.jitter === 0, "Toxic.update keeps the other attributes",
        changed.toJson());
  const less = await median(proxy.listen, 5);
  check(less >= 50 && less - base <= 50 * 1.05 + 10, "the updated latency applies", { base, less });

  const fetched = await proxy.getToxic("latency_downstream");
  check(fetched.type === "latency" && fetched.stream === "downstream" && fetched.toxicity === 1, "getToxic",
        fetched.toJson());
  await expectStatus(proxy.getToxic("nope"), 404, "an unknown toxic is 404");
  await expectStatus(proxy.addToxic({ type: "sideways", attributes: {} }), 400, "an unknown toxic type is 400");

  const all = await toxiproxy.getAll();
  check(Object.keys(all).join() === "web" && all.web.upstream === upstreamAddr, "getAll is keyed by name",
        Object.keys(all));
  const again = await toxiproxy.get("web");
  check(again.listen === proxy.listen, "get shows the same listen address", again.toJson());

  await fetched.remove();
  const quick = await median(proxy.listen, 5);
  check(quick - base < 40, "after Toxic.remove requests are quick again", { base, quick });

  // A Faultline extension through the same client call: an HTTP toxic (the
  // first request answers 503 of the proxy's own, first_n 1 lets the next through).
  const http503 = await proxy.addToxic({ type: "http_status", stream: "downstream", toxicity: 1,
                                         attributes: { status: 503, body: "down", first_n: 1 } });
  check(http503.name === "http_status_downstream" && http503.attributes.status === 503 && http503.attributes.first_n === 1,
        "addToxic http_status (Faultline's HTTP toxic)", http503.toJson());
  const faulted = await get(proxy.listen);
  check(faulted.body === "down", "the first request meets the HTTP toxic", faulted.body);
  const passed = await get(proxy.listen);
  check(passed.body === "hello from upstream\n", "first_n 1: the next request passes", passed.body);
  await http503.remove();

  const down = await again.update({ enabled: false, listen: again.listen, name: "web", upstream: upstreamAddr });
  check(down.enabled === false, "update enabled=false", down.toJson());
  const refused = await new Promise((resolve) => {
    const s = net.connect({ host: "127.0.0.1", port: Number(proxy.listen.split(":")[1]) });
    s.on("connect", () => { s.destroy(); resolve(false); });
    s.on("error", (e) => resolve(e.code === "ECONNREFUSED"));
  });
  check(refused, "a disabled proxy refuses connections");

  const populated = await toxiproxy.populate([
    { name: "web", listen: "127.0.0.1:0", upstream: upstreamAddr },
    { name: "web2", listen: "127.0.0.1:0", upstream: upstreamAddr },
  ]);
  check(Object.keys(populated).sort().join() === "web,web2" && populated.web2.enabled, "populate", Object.keys(populated));
  const viaSecond = await get(populated.web2.listen);
  check(viaSecond.body === "hello from upstream\n", "a populated proxy relays");

  await populated.web2.addToxic({ type: "timeout", stream: "upstream", toxicity: 1, attributes: { timeout: 0 } });
  await toxiproxy.reset();
  const afterReset = await toxiproxy.get("web2");
  const toxicsAfterReset = (await toxiproxy.getApi().get(`${api}/proxies/web2/toxics`)).data;
  check(afterReset.enabled && toxicsAfterReset.length === 0, "reset enables every proxy and removes every toxic",
        toxicsAfterReset);

  // Faultline's extension first_n, added through the same client: the next 2
  // connections are reset, then every one passes (retry logic under test).
  const firstN = await afterReset.addToxic({ type: "reset_peer", stream: "downstream", toxicity: 1,
                                             attributes: { timeout: 0, first_n: 2 } });
  check(firstN.attributes.first_n === 2 && firstN.attributes.timeout === 0, "addToxic reset_peer with first_n",
        firstN.toJson());
  const outcomes = [];
  for (let i = 0; i < 5; i++) {
    try {
      const r = await get(afterReset.listen);
      outcomes.push(r.body === "hello from upstream\n" ? "ok" : "?");
    } catch (e) {
      outcomes.push(e.code || e.message);
    }
  }
  check(outcomes.join() === "ECONNRESET,ECONNRESET,ok,ok,ok",
        "first_n=2: the first 2 connections are reset, the rest pass", outcomes);
  await expectStatus(afterReset.addToxic({ type: "limit_time", attributes: { time: -1 } }), 400,
                     "a negative limit_time is 400");
  await firstN.remove();

  // Every toxic type, Toxiproxy's and Faultline's, through the client's own
  // addToxic, getToxic (GET /proxies/{p}/toxics/{t}), Toxic.update and remove:
  // each is taken, shown back with its attributes, and gone after remove.
  const everyType = [
    ["latency", { latency: 5, jitter: 1 }], ["bandwidth", { rate: 1000 }], ["slow_close", { delay: 10 }],
    ["timeout", { timeout: 100 }], ["slicer", { average_size: 64, size_variation: 8, delay: 1 }],
    ["limit_data", { bytes: 4096 }], ["reset_peer", { timeout: 10 }], ["noop", {}],
    ["limit_time", { time: 60000 }], ["slow_open", { delay: 10 }],
    ["http_status", { status: 503 }], ["http_delay", { delay: 10 }], ["http_reset", {}],
    ["llm_overloaded", {}], ["llm_rate_limit", {}],
  ];
  for (const [type, attributes] of everyType) {
    const t = await afterReset.addToxic({ name: `every_${type}`, type, stream: "downstream", toxicity: 0.5, attributes });
    const shown = await afterReset.getToxic(`every_${type}`);
    const same = Object.entries(attributes).every(([k, v]) => shown.attributes[k] === v);
    check(shown.type === type && shown.toxicity === 0.5 && same, `addToxic and getToxic: ${type}`, shown.toJson());
    const updated = await t.update({ ...t.toJson(), toxicity: 1 });
    check(updated.toxicity === 1, `Toxic.update: ${type}`, updated.toJson());
    await t.remove();
    await expectStatus(afterReset.getToxic(`every_${type}`), 404, `a removed ${type} toxic is 404`);
  }

  await afterReset.remove();
  await (await toxiproxy.get("web")).remove();
  await expectStatus(toxiproxy.get("web"), 404, "a removed proxy is 404");
  check(Object.keys(await toxiproxy.getAll()).length === 0, "nothing is left");
  upstream.close();
}

main().catch((e) => {
  console.error(`FAILED: ${e.stack || e}`);
  process.exit(1);
});
