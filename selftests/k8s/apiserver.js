// A stand-in Kubernetes API server for the guard's Kubernetes tests: enough
// of the API for real kubectl (discovery, CRUD of secrets and pods in
// namespaces, chunked watches, exec over a websocket with the v5/v4 channel
// protocols), all in memory, on 127.0.0.1 at a port the kernel picks. It
// never reaches the internet.
//
//   node apiserver.js
// Prints "listening PORT" once it accepts connections; every request is one
// line on stderr ("METHOD PATH"), and every exec run is "exec NS/POD: ARGS".
// Starts with namespaces dev and prod, a secret db and a pod web in each.
//
// Optional, from the environment (the --k8s-kubeconfig tests):
//   STANDIN_TLS_CERT, STANDIN_TLS_KEY  serve HTTPS with this certificate and key
//   STANDIN_CLIENT_CA                  and require a client certificate issued by it
//   STANDIN_TOKEN                      require "Authorization: Bearer TOKEN" (401 otherwise)
// Each request's line then ends with "auth=ok" (or "auth=none", "auth=wrong")
// and, with a client certificate, "client=CN".
"use strict";
const fs = require("node:fs");
const http = require("node:http");
const https = require("node:https");
const { WebSocketServer } = require("ws");

let resourceVersion = 100;
const nextVersion = () => String(++resourceVersion);

const kinds = {
  secrets: { kind: "Secret", list: "SecretList", namespaced: true, verbs: ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"] },
  pods: { kind: "Pod", list: "PodList", namespaced: true, verbs: ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"] },
  namespaces: { kind: "Namespace", list: "NamespaceList", namespaced: false, verbs: ["create", "delete", "get", "list", "patch", "update", "watch"] },
};
// store[resource]["ns/name"] = object
const store = { secrets: new Map(), pods: new Map(), namespaces: new Map() };
const watchers = new Set();  // {resource, namespace, res}

function meta(name, namespace) {
  const m = { name, uid: `uid-${name}-${resourceVersion}`, resourceVersion: nextVersion(), creationTimestamp: new Date().toISOString() };
  if (namespace) m.namespace = namespace;
  return m;
}
function put(resource, obj) {
  const key = `${obj.metadata.namespace || ""}/${obj.metadata.name}`;
  const existed = store[resource].has(key);
  store[resource].set(key, obj);
  notify(resource, existed ? "MODIFIED" : "ADDED", obj);
}
function notify(resource, type, obj) {
  for (const w of watchers) {
    if (w.resource !== resource) continue;
    if (w.namespace && w.namespace !== obj.metadata.namespace) continue;
    w.res.write(JSON.stringify({ type, object: obj }) + "\n");
  }
}
for (const ns of ["dev", "prod"]) {
  put("namespaces", { apiVersion: "v1", kind: "Namespace", metadata: meta(ns), status: { phase: "Active" } });
  put("secrets", { apiVersion: "v1", kind: "Secret", metadata: meta("db", ns), type: "Opaque", data: { password: Buffer.from(`${ns}-pw`).toString("base64") } });
  put("pods", {
    apiVersion: "v1", kind: "Pod", metadata: meta("web", ns),
    spec: { containers: [{ name: "web", image: "standin" }] },
    status: { phase: "Running", containerStatuses: [{ name: "web", ready: true, state: { running: {} } }] },
  });
}

function send(res, code, body) {
  const text = JSON.stringify(body);
  res.writeHead(code, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text) });
  res.end(text);
}
function status(res, code, reason, message) {
  send(res, code, { kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message, reason, code });
}

function discovery(path, res) {
  if (path === "/api") return send(res, 200, { kind: "APIVersions", versions: ["v1"], serverAddressByClientCIDRs: [] }), true;
  if (path === "/apis") return send(res, 200, { kind: "APIGroupList", apiVersion: "v1", groups: [] }), true;
  if (path === "/version")
    return send(res, 200, { major: "1", minor: "32", gitVersion: "v1.32.0-standin", platform: "linux/amd64" }), true;
  if (path === "/api/v1") {
    const resources = [];
    for (const [name, k] of Object.entries(kinds)) {
      resources.push({ name, singularName: k.kind.toLowerCase(), namespaced: k.namespaced, kind: k.kind, verbs: k.verbs });
    }
    resources.push({ name: "pods/exec", singularName: "", namespaced: true, kind: "PodExecOptions", verbs: ["create", "get"] });
    resources.push({ name: "pods/log", singularName: "", namespaced: true, kind: "Pod", verbs: ["get"] });
    send(res, 200, { kind: "APIResourceList", groupVersion: "v1", resources });
    return true;
  }
  return false;
}

function readBody(req) {
  return new Promise((resolve) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
  });
}

// /api/v1[/namespaces/NS]/RESOURCE[/NAME[/SUB]]
function route(path) {
  const p = path.split("/").filter(Boolean).slice(2);
  let namespace = "";
  if (p[0] === "namespaces" && p.length > 2) {
    namespace = p[1];
    p.splice(0, 2);
  }
  return { namespace, resource: p[0], name: p[1] || "", sub: p[2] || "" };
}

const requiredToken = process.env.STANDIN_TOKEN || "";
// What the request authenticated with, for its log line ("" when nothing is required).
function authText(req) {
  let text = "";
  if (requiredToken) {
    const h = req.headers.authorization || "";
    text += h === `Bearer ${requiredToken}` ? " auth=ok" : h ? " auth=wrong" : " auth=none";
  }
  const peer = req.socket.getPeerCertificate ? req.socket.getPeerCertificate() : null;
  if (peer && peer.subject) text += ` client=${peer.subject.CN}`;
  return text;
}
const authorized = (req) => !requiredToken || req.headers.authorization === `Bearer ${requiredToken}`;

async function serve(req, res) {
  const url = new URL(req.url, "http://standin");
  console.error(`${req.method} ${req.url} ${req.headers["content-type"] || ""}${authText(req)}`);
  if (!authorized(req)) return status(res, 401, "Unauthorized", "Unauthorized");
  if (discovery(url.pathname, res)) return;
  if (!url.pathname.startsWith("/api/v1/")) return status(res, 404, "NotFound", `the server could not find ${url.pathname}`);
  const { namespace, resource, name, sub } = route(url.pathname);
  const k = kinds[resource];
  if (!k || sub) return status(res, 404, "NotFound", `the server could not find the requested resource`);
  const key = `${namespace}/${name}`;
  if (req.method === "GET" && !name) {
    const watch = url.searchParams.get("watch");
    const items = [...store[resource].values()].filter((o) => !namespace || o.metadata.namespace === namespace);
    if (watch && watch !== "0" && watch.toLowerCase() !== "false") {
      res.writeHead(200, { "Content-Type": "application/json", "Transfer-Encoding": "chunked" });
      res.flushHeaders();
      const w = { resource, namespace, res };
      watchers.add(w);
      req.on("close", () => watchers.delete(w));
      return;
    }
    return send(res, 200, { kind: k.list, apiVersion: "v1", metadata: { resourceVersion: String(resourceVersion) }, items });
  }
  if (req.method === "GET") {
    const o = store[resource].get(key);
    return o ? send(res, 200, o) : status(res, 404, "NotFound", `${resource} "${name}" not found`);
  }
  if (req.method === "POST" && !name) {
    if (!(req.headers["content-type"] || "").startsWith("application/json"))
      return status(res, 415, "UnsupportedMediaType", "the stand-in reads JSON bodies only");
    let obj;
    try {
      obj = JSON.parse(await readBody(req));
    } catch {
      return status(res, 400, "BadRequest", "the body is not JSON");
    }
    const n = obj && obj.metadata && obj.metadata.name;
    if (!n) return status(res, 422, "Invalid", "metadata.name: Required value");
    if (store[resource].has(`${namespace}/${n}`)) return status(res, 409, "AlreadyExists", `${resource} "${n}" already exists`);
    obj.metadata = { ...obj.metadata, ...meta(n, namespace || undefined) };
    obj.apiVersion = "v1";
    obj.kind = k.kind;
    if (url.searchParams.get("dryRun") !== "All") put(resource, obj);
    return send(res, 201, obj);
  }
  if (req.method === "DELETE" && name) {
    const o = store[resource].get(key);
    if (!o) return status(res, 404, "NotFound", `${resource} "${name}" not found`);
    store[resource].delete(key);
    notify(resource, "DELETED", o);
    return send(res, 200, o);
  }
  return status(res, 405, "MethodNotAllowed", `${req.method} is not served by the stand-in`);
}

const tls = process.env.STANDIN_TLS_CERT
  ? {
      cert: fs.readFileSync(process.env.STANDIN_TLS_CERT),
      key: fs.readFileSync(process.env.STANDIN_TLS_KEY),
      ...(process.env.STANDIN_CLIENT_CA
        ? { ca: fs.readFileSync(process.env.STANDIN_CLIENT_CA), requestCert: true, rejectUnauthorized: true }
        : {}),
    }
  : null;
const server = tls ? https.createServer(tls, serve) : http.createServer(serve);

// exec: GET .../pods/NAME/exec?command=...&stdout=true upgraded to a
// websocket; each message's first byte is its channel (1 stdout, 3 the
// status). The command is not run: `echo ARGS` is answered with ARGS, any
// other command with its words.
const wss = new WebSocketServer({
  noServer: true,
  handleProtocols: (protocols) => ["v5.channel.k8s.io", "v4.channel.k8s.io"].find((p) => protocols.has(p)) || false,
});
server.on("upgrade", (req, socket, head) => {
  const url = new URL(req.url, "http://standin");
  console.error(`${req.method} ${req.url} (upgrade)${authText(req)}`);
  if (!authorized(req)) {
    socket.end("HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n");
    return;
  }
  const { namespace, resource, name, sub } = route(url.pathname);
  if (resource !== "pods" || sub !== "exec" || !store.pods.has(`${namespace}/${name}`)) {
    socket.end("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
    return;
  }
  wss.handleUpgrade(req, socket, head, (ws) => {
    const command = url.searchParams.getAll("command");
    console.error(`exec ${namespace}/${name}: ${command.join(" ")}`);
    const out = (command[0] === "echo" ? command.slice(1) : command).join(" ") + "\n";
    ws.send(Buffer.concat([Buffer.from([1]), Buffer.from(out)]));
    ws.send(Buffer.concat([Buffer.from([3]), Buffer.from(JSON.stringify({ metadata: {}, status: "Success" }))]));
    ws.close(1000);
  });
});

server.listen(0, "127.0.0.1", () => {
  process.stdout.write(`listening ${server.address().port}\n`);
});
process.on("SIGTERM", () => process.exit(0));
