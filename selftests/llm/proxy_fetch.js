// A fetch for the model SDKs that sends absolute-form requests to an HTTP
// proxy, as a proxy agent does: Node 20's fetch ignores HTTP_PROXY. The body
// goes with a Content-Length (the stand-ins read bodies by length). Hooks:
// onAttempt() per request sent; onAnswer(res, body) per answer, as the client
// got it (res: Node's IncomingMessage, body: a Buffer).
'use strict';
const http = require('node:http');

function makeProxyFetch(proxy, {onAttempt, onAnswer} = {}) {
  const p = new URL(proxy);
  return function proxyFetch(url, init = {}) {
    if (onAttempt) onAttempt();
    const headers = {};
    new Headers(init.headers || {}).forEach((v, k) => (headers[k] = v));
    if (init.body) headers['content-length'] = String(Buffer.byteLength(init.body));
    return new Promise((resolve, reject) => {
      const req = http.request(
          {host: p.hostname, port: p.port, method: init.method || 'GET', path: String(url), headers},
          (res) => {
            const chunks = [];
            res.on('data', (c) => chunks.push(c));
            res.on('end', () => {
              const body = Buffer.concat(chunks);
              if (onAnswer) onAnswer(res, body);
              const h = new Headers();
              for (const [k, v] of Object.entries(res.headers)) h.set(k, Array.isArray(v) ? v.join(', ') : v);
              resolve(new Response(body, {status: res.statusCode, headers: h}));
            });
            res.on('error', reject);
          },
      );
      req.on('error', reject);
      if (init.body) req.write(init.body);
      req.end();
    });
  };
}

module.exports = {makeProxyFetch};
