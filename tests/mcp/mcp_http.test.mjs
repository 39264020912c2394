// mcp_http.test.mjs — drives brig's MCP server over the Streamable HTTP
// transport of `brig serve` (/v1/mcp/{ns}/{agent}/{session}) with the official
// SDK's StreamableHTTPClientTransport, over TLS with bearer tokens as a remote
// client would: initialize, tools/list, tools/call, progress, cancellation,
// a client that leaves mid-call, DELETE, and refused tokens and namespaces.
// The server runs on 127.0.0.1 with a throwaway certificate; its computers are
// labelled brig.test=<unique> and destroyed at the end.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, readFileSync, chmodSync, openSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import https from 'node:https';
import net from 'node:net';
import { Readable } from 'node:stream';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const BRIG = process.env.BRIG_BIN;
assert.ok(BRIG, 'BRIG_BIN must name the built brig');
const IMAGE = process.env.BRIG_TEST_MCP_IMAGE || 'brig-test:local';
const tag = `mcphttp-${process.pid}-${Date.now()}`;
const dir = mkdtempSync(join(tmpdir(), 'brig-mcphttp-'));
const NS = 'mcphttp';
const TOK_A = randomBytes(20).toString('hex');
const TOK_OTHER = randomBytes(20).toString('hex');
const TOK_ALL = randomBytes(20).toString('hex');
let server, port, ca;

// fetch over node:https trusting only the test's certificate (the SDK takes
// a custom fetch; node's own has no per-call CA).
function tlsFetch(url, init = {}) {
  return new Promise((resolve, reject) => {
    const headers = Object.fromEntries(new Headers(init.headers).entries());
    const req = https.request(new URL(url), { method: init.method || 'GET', headers, ca, signal: init.signal },
      (res) => {
        const h = new Headers();
        for (const [k, v] of Object.entries(res.headers)) h.set(k, Array.isArray(v) ? v.join(', ') : v);
        const empty = res.statusCode === 204 || res.statusCode === 304;
        if (empty) res.resume();
        resolve(new Response(empty ? null : Readable.toWeb(res), { status: res.statusCode, headers: h }));
      });
    req.on('error', reject);
    req.end(init.body ?? undefined);
  });
}

const url = (session, ns = NS) => new URL(`https://127.0.0.1:${port}/v1/mcp/${ns}/node/${session}`);

async function connect(session, token = TOK_A, ns = NS) {
  const transport = new StreamableHTTPClientTransport(url(session, ns), {
    fetch: tlsFetch, requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  const client = new Client({ name: 'brig-mcp-http-test', version: '1.0.0' });
  await client.connect(transport);
  return { client, transport };
}

// One raw POST, for what the SDK would not send.
async function post(session, body, headers = {}, token = TOK_A) {
  const r = await tlsFetch(url(session), {
    method: 'POST', body: JSON.stringify(body),
    headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream',
      Authorization: `Bearer ${token}`, ...headers },
  });
  return { status: r.status, text: await r.text(), headers: r.headers };
}

async function api(method, path, body) {
  const r = await tlsFetch(new URL(`https://127.0.0.1:${port}${path}`), {
    method, body: body && JSON.stringify(body),
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${TOK_A}` },
  });
  return { status: r.status, json: await r.json() };
}

const call = (client, name, args = {}, opts) => client.callTool({ name, arguments: args }, undefined, opts);
const freePort = () => new Promise((res) => {
  const s = net.createServer().listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => res(p)); });
});

before(async () => {
  const cert = join(dir, 'cert.pem'), key = join(dir, 'key.pem'), tokens = join(dir, 'tokens');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert, '-days', '1',
    '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
  ca = readFileSync(cert);
  writeFileSync(tokens, `${TOK_A} ${NS}\n${TOK_OTHER} mcphttp-other\n${TOK_ALL} *\n`);
  chmodSync(tokens, 0o600);
  port = await freePort();
  const log = openSync(join(dir, 'serve.log'), 'w');
  server = spawn(BRIG, ['serve', '--listen', `tcp://127.0.0.1:${port}`, '--tls-cert', cert, '--tls-key', key,
    '--tokens', tokens, '--store', `sqlite://${join(dir, 'db')}`, '--image', IMAGE],
  { stdio: ['ignore', log, log] });
  for (let i = 0; ; i++) {
    try {
      const r = await tlsFetch(new URL(`https://127.0.0.1:${port}/v1/health`));
      await r.text();
      break;
    } catch (e) {
      if (i > 200) throw e;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  // The computers of this test carry its label: made through the API first,
  // then adopted by the MCP sessions.
  for (const session of ['main', 'gone']) {
    const r = await api('POST', '/v1/computers', { ns: NS, agent: 'node', session,
      spec: { image: IMAGE, labels: { 'brig.test': tag } } });
    assert.ok(r.status === 200 || r.status === 201, JSON.stringify(r.json));
  }
});

after(async () => {
  server?.kill('SIGTERM');
  await new Promise((r) => (server && server.exitCode === null ? server.once('exit', r) : r()));
  const names = execFileSync('docker', ['ps', '-a', '--filter', `label=brig.test=${tag}`, '--format', '{{.Names}}'],
    { encoding: 'utf8' }).split('\n').filter(Boolean);
  // The session store of this test's server (not the machine's default one).
  if (names.length) {
    execFileSync(BRIG, ['destroy', ...names],
      { stdio: 'inherit', env: { ...process.env, BRIG_STORE: `sqlite://${join(dir, 'db')}` } });
  }
  if (process.env.BRIG_TEST_KEEP_LOG) console.log(readFileSync(join(dir, 'serve.log'), 'utf8'));
  rmSync(dir, { recursive: true, force: true });
});

test('initialize, tools/list and tools/call through the SDK over HTTPS', async () => {
  const { client, transport } = await connect('main');
  try {
    assert.equal(client.getServerVersion().name, 'brig');
    assert.match(transport.sessionId, /^[0-9a-f]{32}$/);
    const { tools } = await client.listTools();
    assert.equal(tools.length, 18);
    assert.ok(tools.some((t) => t.name === 'run'));
    const r = await call(client, 'run', { command: 'echo hello-http > note; cat note; id -u' });
    assert.equal(r.isError, false, JSON.stringify(r));
    assert.equal(r.structuredContent.exit_code, 0);
    assert.match(r.structuredContent.stdout, /^hello-http\n[1-9][0-9]*\n$/);
    const f = await call(client, 'read_file', { path: 'note' });
    assert.equal(f.structuredContent.content, 'hello-http\n');
    // Concurrent calls on one session: each answer reaches its own POST.
    const many = await Promise.all([...Array(8).keys()].map((i) => call(client, 'run', { command: `echo ${i}` })));
    many.forEach((m, i) => assert.equal(m.structuredContent.stdout, `${i}\n`));
    // Recorded by the token (its line in the tokens file), as every exec of brig serve.
    const h = await api('GET', `/v1/computers/${NS}/node/main/history?limit=50`);
    assert.equal(h.status, 200, JSON.stringify(h.json));
    const row = h.json.history.find((x) => x.argv.join(' ').includes('hello-http'));
    assert.equal(row?.actor, 'serve token, line 1', JSON.stringify(h.json.history));
  } finally {
    await transport.terminateSession();
    await client.close();
  }
});

test('progress notifications reach the call that asked for them', async () => {
  const { client, transport } = await connect('main');
  try {
    const seen = [];
    const r = await call(client, 'run', { command: 'sleep 2.5; echo done' },
      { onprogress: (p) => seen.push(p), timeout: 60000 });
    assert.equal(r.structuredContent.stdout, 'done\n');
    assert.ok(seen.length >= 1, 'no progress notification');
  } finally {
    await transport.terminateSession();
    await client.close();
  }
});

test('a large answer after progress streams whole and in order', async () => {
  // Progress first, then a 2 MiB answer: the SSE stream is read in many
  // pieces after an event already sent, and must arrive byte for byte.
  const { client, transport } = await connect('main');
  try {
    const seen = [];
    const r = await call(client, 'run', {
      command: "sleep 2.5; head -c 600000 /dev/zero | tr '\\0' a; head -c 2000000 /dev/zero | tr '\\0' m; " +
        "head -c 600000 /dev/zero | tr '\\0' z",
      max_output_bytes: 1048576,
    }, { onprogress: (p) => seen.push(p), timeout: 60000 });
    assert.ok(seen.length >= 1, 'no progress notification');
    const out = r.structuredContent.stdout;
    const want = 'a'.repeat(524288) + `\n[${3200000 - 1048576} bytes omitted]\n` + 'z'.repeat(524288);
    assert.equal(out.length, want.length);
    assert.ok(out === want, 'the answer differs from what the command wrote');
    assert.equal(r.structuredContent.stdout_omitted, 3200000 - 1048576);
  } finally {
    await transport.terminateSession();
    await client.close();
  }
});

test('a read too big for one answer comes in pieces that add up', async () => {
  // 8 MiB of control characters is text (valid UTF-8) that JSON escapes
  // six-fold, and an answer carries its content twice (structuredContent
  // and the text): read_file answers with what fits an MCP message and
  // says where to read on.
  const { client, transport } = await connect('main');
  try {
    await call(client, 'run', { command: "head -c 8388608 /dev/zero | tr '\\0' '\\001' > ctl.txt" });
    const t = await call(client, 'read_file', { path: 'ctl.txt', length: 8388608, encoding: 'text' });
    const n = t.structuredContent.bytes;
    assert.ok(n > 0 && n < 8388608 && !t.structuredContent.eof, JSON.stringify({ n }));
    assert.ok(t.structuredContent.content === '\x01'.repeat(n));
    const parts = [];
    let offset = 0;
    for (let i = 0; i < 10; i++) {
      const r = await call(client, 'read_file', { path: 'ctl.txt', offset, length: 8388608 });
      assert.equal(r.structuredContent.encoding, 'base64');
      parts.push(Buffer.from(r.structuredContent.content, 'base64'));
      offset += r.structuredContent.bytes;
      if (r.structuredContent.eof) break;
    }
    assert.ok(parts.length > 1);
    assert.ok(Buffer.concat(parts).equals(Buffer.alloc(8388608, 1)));
    await call(client, 'remove', { path: 'ctl.txt' });
  } finally {
    await transport.terminateSession();
    await client.close();
  }
});

test('a cancelled call ends its command and the computer keeps its files', async () => {
  const { client, transport } = await connect('main');
  try {
    await call(client, 'write_file', { path: 'kept.txt', content: 'still here' });
    const ac = new AbortController();
    const started = Date.now();
    const p = call(client, 'run', { command: 'sleep 300' }, { signal: ac.signal, timeout: 120000 });
    setTimeout(() => ac.abort('test cancels'), 1500);
    await assert.rejects(p);
    assert.ok(Date.now() - started < 30000);
    // brig-init ended the command: no sleep is left in the computer.
    let left;
    for (let i = 0; i < 50; i++) {
      left = await call(client, 'run', { command: 'ps -eo args | grep "^sleep 300" || true' });
      if (left.structuredContent.stdout === '') break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(left.structuredContent.stdout, '');
    const f = await call(client, 'read_file', { path: 'kept.txt' });
    assert.equal(f.structuredContent.content, 'still here');
  } finally {
    await transport.terminateSession();
    await client.close();
  }
});

test('a client that leaves mid-call ends its command', async () => {
  const { client, transport } = await connect('main');
  try {
    const sid = transport.sessionId;
    const ac = new AbortController();
    const res = tlsFetch(url('main'), {
      method: 'POST', signal: ac.signal,
      body: JSON.stringify({ jsonrpc: '2.0', id: 'raw-1', method: 'tools/call',
        params: { name: 'run', arguments: { command: 'sleep 301' } } }),
      headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream',
        Authorization: `Bearer ${TOK_A}`, 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '2025-06-18' },
    });
    const r = await res;
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('content-type'), 'text/event-stream');
    await new Promise((resolve) => setTimeout(resolve, 1500));
    ac.abort();
    let left;
    for (let i = 0; i < 100; i++) {
      left = await call(client, 'run', { command: 'ps -eo args | grep "^sleep 301" || true' });
      if (left.structuredContent.stdout === '') break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.equal(left.structuredContent.stdout, '');
  } finally {
    await transport.terminateSession();
    await client.close();
  }
});

test('wrong tokens, namespaces, sessions and versions are refused', async () => {
  await assert.rejects(connect('main', 'not-a-token-at-all-0123456789'), /unauthorized/);
  await assert.rejects(connect('main', TOK_OTHER), /forbidden/);
  await assert.rejects(connect('main', TOK_A, 'mcphttp-other'), /forbidden/);

  const { client, transport } = await connect('main');
  const sid = transport.sessionId;
  const list = { jsonrpc: '2.0', id: 7, method: 'tools/list' };
  // A session answers only the path and the token that opened it.
  assert.equal((await post('main', list, { 'Mcp-Session-Id': sid }, TOK_ALL)).status, 404);
  assert.equal((await post('gone', list, { 'Mcp-Session-Id': sid })).status, 404);
  assert.equal((await post('main', list, { 'Mcp-Session-Id': 'f'.repeat(32) })).status, 404);
  assert.equal((await post('main', list)).status, 400, 'no session id');
  assert.equal((await post('main', list, { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '1999-01-01' })).status,
    400);
  assert.equal((await post('main', list, { 'Mcp-Session-Id': sid, Origin: 'https://evil.example' })).status, 403);
  const ok = await post('main', list, { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '2025-06-18' });
  assert.equal(ok.status, 200);
  assert.equal(ok.headers.get('content-type'), 'application/json');
  assert.equal(JSON.parse(ok.text).result.tools.length, 18);
  const bad = await post('main', 'not a request', { 'Mcp-Session-Id': sid });
  assert.equal(bad.status, 400);
  assert.equal(JSON.parse(bad.text).error.code, -32700); // a bare JSON string
  // GET (a server stream) is not offered.
  const g = await tlsFetch(url('main'), { headers: { Authorization: `Bearer ${TOK_A}`, 'Mcp-Session-Id': sid } });
  assert.equal(g.status, 405);
  await g.text();
  // DELETE ends it; the id is then unknown.
  await transport.terminateSession();
  assert.equal((await post('main', list, { 'Mcp-Session-Id': sid })).status, 404);
  await client.close();
  // /metrics counts these refusals by what they are, never as internal errors.
  const m = await tlsFetch(new URL(`https://127.0.0.1:${port}/metrics`), { headers: { Authorization: `Bearer ${TOK_ALL}` } });
  assert.equal(m.status, 200);
  const metrics = await m.text();
  const count = (code) => Number((metrics.match(new RegExp(`^brig_serve_errors_total\\{code="${code}"\\} (\\d+)$`, 'm')) || [])[1] || 0);
  assert.equal(count('internal'), 0, metrics);
  assert.ok(count('mcp_not_found') >= 4, metrics);
  assert.ok(count('mcp_invalid') >= 3, metrics); // no session id, bad version, not a request
  assert.ok(count('mcp_forbidden') >= 1, metrics);
});
