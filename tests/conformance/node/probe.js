// Node.js client probe for the NO_PROXY conformance harness.
// Usage: node probe.js axios|proxy-from-env|undici [verify]
//        (jobs as JSON lines on stdin: {"id","url","env"})
// The process starts with no proxy variables; before each job the previous job's
// variables are removed and the job's set.
//  axios : axios.get(url) with its defaults: the proxy comes from proxy-from-env's
//          getProxyForUrl (bundled in axios) and axios' own NO_PROXY check. The bare
//          proxy-from-env answer (the npm package) is reported as "pfe".
//  proxy-from-env: the bare package, as code that uses it without axios does:
//          getProxyForUrl(url) (the npm package, pinned in package.json), then the request
//          for real with node's http/https: direct when it returns '', else to that proxy
//          (absolute-form GET for http URLs, CONNECT for https URLs; Proxy-Authorization
//          from the proxy URL's credentials). The answer is reported as "pfe".
//  undici: a new EnvHttpProxyAgent per job (it reads the environment when built),
//          undici.request(url, {dispatcher}).
// Certificates are not checked, except with `verify` (the trust checks): then node's
// defaults (its bundled roots plus NODE_EXTRA_CA_CERTS, read at start).
'use strict';
const readline = require('readline');
const fs = require('fs');
const path = require('path');

const mode = process.argv[2];
const ver = (p) => JSON.parse(fs.readFileSync(path.join(__dirname, 'node_modules', p, 'package.json'))).version;

const TIMEOUT = 3000;
const VERIFY = process.argv[3] === 'verify';
// TLS options: none with `verify` (node's defaults), otherwise accept any certificate
const tlsOpts = VERIFY ? {} : { rejectUnauthorized: false };

// Resolves with the status code of `req`'s answer (or of a CONNECT), rejects on error/timeout.
function settle(req, connect) {
  return new Promise((resolve, reject) => {
    req.setTimeout(TIMEOUT, () => req.destroy(new Error(`timeout after ${TIMEOUT} ms`)));
    req.on('error', reject);
    if (connect) {
      req.on('connect', (res, socket) => { socket.destroy(); resolve(res.statusCode); });
    }
    req.on('response', (res) => { res.resume(); resolve(res.statusCode); });
    req.end();
  });
}

function direct(url) {
  const u = new URL(url);
  const mod = u.protocol === 'https:' ? require('https') : require('http');
  return settle(mod.request(u, { method: 'GET', agent: false, ...tlsOpts }), false);
}

// `verify` (trust checks): after the CONNECT, TLS to the origin through the tunnel (node's
// defaults verify its certificate) and a GET, as https-proxy-agent does; the GET's status.
function throughTunnel(connect, u) {
  return new Promise((resolve, reject) => {
    connect.setTimeout(TIMEOUT, () => connect.destroy(new Error(`timeout after ${TIMEOUT} ms`)));
    connect.on('error', reject);
    connect.on('connect', (res, socket) => {
      if (res.statusCode !== 200) { socket.destroy(); reject(new Error(`CONNECT answered ${res.statusCode}`)); return; }
      const servername = u.hostname.replace(/^\[|\]$/g, '');
      // an agent whose only connection is the tunnel (with `agent: false` node would dial the origin)
      const agent = new (require('https').Agent)();
      agent.createConnection = () => require('tls').connect({ socket, servername });
      const req = require('https').request(u, { method: 'GET', agent });
      settle(req, false).then(resolve, reject);
    });
    connect.end();
  });
}

function viaProxy(url, proxy) {
  const u = new URL(url);
  const p = new URL(proxy); // an unparsable proxy URL fails the request, as in any client
  if (p.protocol !== 'http:' && p.protocol !== 'https:') {
    throw new Error(`unsupported proxy protocol ${p.protocol}`);
  }
  const mod = p.protocol === 'https:' ? require('https') : require('http');
  const headers = {};
  if (p.username || p.password) {
    const cred = `${decodeURIComponent(p.username)}:${decodeURIComponent(p.password)}`;
    headers['Proxy-Authorization'] = `Basic ${Buffer.from(cred).toString('base64')}`;
  }
  const opts = {
    host: p.hostname.replace(/^\[|\]$/g, ''),
    port: p.port || (p.protocol === 'https:' ? 443 : 80),
    agent: false,
    ...tlsOpts,
    headers,
  };
  if (u.protocol === 'https:') {
    const target = `${u.hostname}:${u.port || 443}`;
    const connect = mod.request({ ...opts, method: 'CONNECT', path: target, headers: { ...headers, Host: target } });
    if (VERIFY) return throughTunnel(connect, u);
    return settle(connect, true);
  }
  return settle(mod.request({ ...opts, method: 'GET', path: url, headers: { ...headers, Host: u.host } }), false);
}

async function main() {
  let one;
  let version;
  let pfe = null;
  if (mode === 'axios') {
    const axios = require('axios');
    pfe = require('proxy-from-env');
    version = `axios ${ver('axios')}, proxy-from-env ${ver('proxy-from-env')}`;
    one = async (url) => {
      const r = await axios.get(url, {
        timeout: 3000, maxRedirects: 0, validateStatus: () => true,
      });
      return r.status;
    };
  } else if (mode === 'proxy-from-env') {
    pfe = require('proxy-from-env');
    version = `proxy-from-env ${ver('proxy-from-env')}`;
    one = async (url) => {
      const proxy = pfe.getProxyForUrl(url);
      return proxy ? viaProxy(url, proxy) : direct(url);
    };
  } else if (mode === 'undici') {
    const undici = require('undici');
    version = ver('undici');
    one = async (url) => {
      const agent = new undici.EnvHttpProxyAgent({ connect: { ...tlsOpts, timeout: 3000 } });
      try {
        const r = await undici.request(url, {
          dispatcher: agent, headersTimeout: 3000, bodyTimeout: 3000, maxRedirections: 0,
        });
        await r.body.dump();
        return r.statusCode;
      } finally {
        agent.destroy().catch(() => {});
      }
    };
  } else {
    throw new Error(`unknown mode ${mode}`);
  }
  process.stdout.write(JSON.stringify({ version }) + '\n');
  let prev = [];
  const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of rl) {
    if (!line.trim()) continue;
    const job = JSON.parse(line);
    for (const k of prev) delete process.env[k];
    for (const [k, v] of Object.entries(job.env)) process.env[k] = v;
    prev = Object.keys(job.env);
    const out = { id: job.id, ok: false, status: null, error: null };
    if (pfe) {
      try { out.pfe = pfe.getProxyForUrl(job.url) || null; } catch (e) { out.pfe = `error: ${e}`; }
    }
    try {
      out.status = await one(job.url);
      out.ok = true;
    } catch (e) {
      const cause = e && e.cause ? ` (cause: ${e.cause.code || ''} ${e.cause.message || e.cause})` : '';
      out.error = `${(e && (e.code || e.name)) || 'Error'}: ${(e && e.message) || e}${cause}`.slice(0, 500);
    }
    process.stdout.write(JSON.stringify(out) + '\n');
  }
  // `verify` runs one job per process: a kept-alive TLS socket must not keep it running
  if (VERIFY) process.exit(0);
}
main().catch((e) => { process.stderr.write(String(e && e.stack || e) + '\n'); process.exit(2); });
