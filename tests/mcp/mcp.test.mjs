// mcp.test.mjs — drives `brig mcp` with the official MCP TypeScript SDK client
// (Client + StdioClientTransport) against the built brig ($BRIG_BIN): the
// handshake, every tool's schema and a call of every tool (the SDK checks
// results against the output schemas), capped output, a binary round trip,
// concurrency, cancellation, a client that disconnects mid-call, and the MCP
// Inspector's CLI (pinned 0.15.0: the last release that runs on Node 20).
// Computers are labelled brig.test=<unique> and destroyed at the end.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createHash, randomBytes } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { LATEST_PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS } from '@modelcontextprotocol/sdk/types.js';
import Ajv from 'ajv';

const BRIG = process.env.BRIG_BIN;
assert.ok(BRIG, 'BRIG_BIN must name the built brig');
const IMAGE = process.env.BRIG_TEST_MCP_IMAGE || 'brig-test:local';
const tag = `mcp-${process.pid}-${Date.now()}`;
const dir = mkdtempSync(join(tmpdir(), 'brig-mcp-'));
const store = join(dir, 'store.db');

function serverArgs(session) {
  return ['mcp', '--ns', 'mcptest', '--agent', 'node', '--session', session, '--store', store,
    '--image', IMAGE, '--label', `brig.test=${tag}`];
}

function computers() {
  const out = execFileSync('docker', ['ps', '-a', '--filter', `label=brig.test=${tag}`, '--format', '{{.Names}}'],
    { encoding: 'utf8' });
  return out.split('\n').filter(Boolean);
}

async function connect(session) {
  const transport = new StdioClientTransport({
    command: BRIG, args: serverArgs(session), env: { ...process.env }, stderr: 'inherit',
  });
  const client = new Client({ name: 'brig-mcp-test', version: '1.0.0' });
  await client.connect(transport);
  return client;
}

const call = (client, name, args = {}, opts) => client.callTool({ name, arguments: args }, undefined, opts);
const text = (r) => r.content.map((c) => c.text).join('');

let client;
before(async () => { client = await connect('main'); });
after(async () => {
  try { await client?.close(); } catch { /* already gone */ }
  const names = computers();
  // The test's own session store (not the machine's default one).
  if (names.length) execFileSync(BRIG, ['destroy', ...names], { stdio: 'inherit', env: { ...process.env, BRIG_STORE: store } });
  rmSync(dir, { recursive: true, force: true });
});

test('initialize negotiates the SDK\'s protocol version and capabilities', () => {
  const info = client.getServerVersion();
  assert.equal(info.name, 'brig');
  const caps = client.getServerCapabilities();
  assert.ok(caps.tools, 'tools capability');
  assert.ok(caps.logging, 'logging capability');
  assert.ok(client.getInstructions().includes('/workspace'));
});

test('tools/list: every tool has a description and valid input and output schemas, and creates nothing', async () => {
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name).sort();
  assert.deepEqual(names, ['checkpoint', 'computer_info', 'edit_file', 'kill_process', 'list_checkpoints',
    'list_directory', 'list_processes', 'make_directory', 'move', 'read_file', 'read_process_output', 'recover',
    'remove', 'run', 'send_input', 'start_process', 'stat', 'write_file']);
  const ajv = new Ajv({ strict: false });
  for (const t of tools) {
    assert.ok(t.description.length > 40, `${t.name}: description`);
    assert.equal(t.inputSchema.type, 'object', `${t.name}: input schema`);
    assert.equal(t.outputSchema.type, 'object', `${t.name}: output schema`);
    ajv.compile(t.inputSchema);
    ajv.compile(t.outputSchema);
  }
  assert.deepEqual(computers(), [], 'listing tools must not create the computer');
});

test('older protocol versions are accepted, unknown ones answered with the latest', async () => {
  for (const [asked, want] of [['2024-11-05', '2024-11-05'], ['1999-01-01', LATEST_PROTOCOL_VERSION]]) {
    const lines = await raw(['{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"' + asked +
      '","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}'], 1);
    assert.equal(lines[0].result.protocolVersion, want);
  }
  assert.ok(SUPPORTED_PROTOCOL_VERSIONS.includes('2024-11-05'));
});

test('malformed, unknown and wrong requests get JSON-RPC errors and the server goes on', async () => {
  const lines = await raw([
    'not json',
    '[]',
    '{"jsonrpc":"2.0","id":1,"method":"no/such"}',
    '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"no_such_tool"}}',
    '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":7}}',
    '{"jsonrpc":"2.0","id":4,"method":"logging/setLevel","params":{"level":"loud"}}',
    '{"jsonrpc":"1.0","id":5,"method":"ping"}',
    '{"jsonrpc":"2.0","id":6,"method":"ping"}',
  ], 8);
  const byId = Object.fromEntries(lines.filter((l) => l.id !== null).map((l) => [l.id, l]));
  assert.deepEqual(lines.filter((l) => l.id === null).map((l) => l.error.code).sort(), [-32700, -32600].sort());
  assert.equal(byId[1].error.code, -32601);
  assert.equal(byId[2].error.code, -32602);
  assert.equal(byId[3].error.code, -32602);
  assert.equal(byId[4].error.code, -32602);
  assert.equal(byId[5].error.code, -32600);
  assert.deepEqual(byId[6].result, {});
});

test('a request over the size cap is refused and the server goes on', async () => {
  const big = '{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"' + 'a'.repeat(17 << 20) + '"}}';
  const lines = await raw([big, '{"jsonrpc":"2.0","id":2,"method":"ping"}'], 2);
  assert.equal(lines[0].error.code, -32600);
  assert.match(lines[0].error.message, /limited to 16 MiB/);
  assert.deepEqual(lines[1].result, {});
});

test('every tool, called (the SDK validates results against output schemas)', async () => {
  let r = await call(client, 'run', { command: 'echo hello; echo oops >&2; exit 3' });
  assert.equal(r.isError, false);
  assert.equal(r.structuredContent.exit_code, 3);
  assert.equal(r.structuredContent.stdout, 'hello\n');
  assert.equal(r.structuredContent.stderr, 'oops\n');
  assert.match(text(r), /exit code 3/);
  // who ran it, in the store's audit log: "mcp"
  const hist = JSON.parse(execFileSync(BRIG, ['history', '--ns', 'mcptest', '--agent', 'node', '--session', 'main',
    '--store', store, '--json'], { encoding: 'utf8' }));
  assert.ok(hist.commands.some((c) => c.actor === 'mcp'), JSON.stringify(hist.commands));

  r = await call(client, 'run', { argv: ['sh', '-c', 'echo "$FOO" in $(pwd)'], env: { FOO: 'bar' }, workdir: '/tmp' });
  assert.equal(r.structuredContent.stdout, 'bar in /tmp\n');
  r = await call(client, 'run', { command: 'tr a-z A-Z', stdin: 'piped in' });
  assert.equal(r.structuredContent.stdout, 'PIPED IN');
  r = await call(client, 'run', { command: 'true', argv: ['true'] });
  assert.equal(r.isError, true);
  assert.match(text(r), /not both/);
  await client.setLoggingLevel('warning');
  await client.setLoggingLevel('info');

  r = await call(client, 'run', { command: 'sleep 5', timeout_seconds: 1 });
  assert.equal(r.isError, true);
  assert.match(text(r), /timed out after 1s/);
  r = await call(client, 'run', { command: 'echo still here' });
  assert.equal(r.structuredContent.stdout, 'still here\n', 'a timed-out command leaves the computer running');

  r = await call(client, 'make_directory', { path: 'src/lib' });
  assert.equal(r.structuredContent.path, '/workspace/src/lib');
  r = await call(client, 'write_file', { path: 'src/lib/a.txt', content: 'one\ntwo\ntwo\n' });
  assert.equal(r.structuredContent.bytes_written, 12);
  r = await call(client, 'write_file', { path: 'src/lib/a.txt', content: 'three\n', append: true });
  r = await call(client, 'read_file', { path: '/workspace/src/lib/a.txt' });
  assert.equal(r.structuredContent.content, 'one\ntwo\ntwo\nthree\n');
  assert.equal(r.structuredContent.encoding, 'text');
  assert.equal(r.structuredContent.eof, true);
  r = await call(client, 'read_file', { path: 'src/lib/a.txt', offset: 4, length: 3 });
  assert.equal(r.structuredContent.content, 'two');
  assert.equal(r.structuredContent.eof, false);

  r = await call(client, 'edit_file', { path: 'src/lib/a.txt', old_string: 'two', new_string: '2' });
  assert.equal(r.isError, true);
  assert.match(text(r), /occurs 2 times/);
  r = await call(client, 'edit_file', { path: 'src/lib/a.txt', old_string: 'one\n', new_string: '1\n' });
  assert.equal(r.structuredContent.replacements, 1);
  r = await call(client, 'edit_file', { path: 'src/lib/a.txt', old_string: 'two', new_string: '2', replace_all: true });
  assert.equal(r.structuredContent.replacements, 2);
  r = await call(client, 'edit_file', { path: 'src/lib/a.txt', old_string: 'nowhere', new_string: 'x' });
  assert.equal(r.isError, true);
  assert.match(text(r), /not found/);
  r = await call(client, 'read_file', { path: 'src/lib/a.txt' });
  assert.equal(r.structuredContent.content, '1\n2\n2\nthree\n');

  r = await call(client, 'list_directory', { path: 'src', depth: 2 });
  assert.deepEqual(r.structuredContent.entries.map((e) => [e.name, e.type]),
    [['lib', 'directory'], ['lib/a.txt', 'file']]);
  r = await call(client, 'stat', { path: 'src/lib/a.txt' });
  assert.equal(r.structuredContent.exists, true);
  assert.equal(r.structuredContent.type, 'file');
  assert.equal(r.structuredContent.size, 12);
  r = await call(client, 'stat', { path: 'nothing/here' });
  assert.equal(r.structuredContent.exists, false);

  r = await call(client, 'move', { source: 'src/lib/a.txt', destination: 'b.txt' });
  assert.equal(r.structuredContent.destination, '/workspace/b.txt');
  await call(client, 'write_file', { path: 'c.txt', content: 'c' });
  r = await call(client, 'move', { source: 'c.txt', destination: 'b.txt' });
  assert.equal(r.isError, true);
  assert.match(text(r), /exists/);
  r = await call(client, 'remove', { path: 'src' });
  assert.equal(r.isError, true);
  assert.match(text(r), /not empty/);
  r = await call(client, 'remove', { path: 'src', recursive: true });
  assert.equal(r.structuredContent.removed, true);
  r = await call(client, 'read_file', { path: 'src/lib/a.txt' });
  assert.equal(r.isError, true);
  assert.match(text(r), /No such file/);
  r = await call(client, 'write_file', { path: '/etc/passwd', content: 'x' });
  assert.equal(r.isError, true);
  assert.match(text(r), /writable places/);
  // Kinds, mounts and appends as brig-init's file API sees them.
  r = await call(client, 'read_file', { path: '/workspace' });
  assert.equal(r.isError, true);
  assert.match(text(r), /not a regular file/);
  r = await call(client, 'list_directory', { path: 'b.txt' });
  assert.equal(r.isError, true);
  assert.match(text(r), /not a directory/);
  r = await call(client, 'write_file', { path: 'app.txt', content: 'a' });
  r = await call(client, 'write_file', { path: 'app.txt', content: 'b', append: true });
  assert.equal(r.isError, false, text(r));
  r = await call(client, 'read_file', { path: 'app.txt' });
  assert.equal(r.structuredContent.content, 'ab');
  r = await call(client, 'stat', { path: 'app.txt' });
  assert.equal(typeof r.structuredContent.owner, 'string');
  assert.notEqual(r.structuredContent.owner, '');
  assert.deepEqual([r.structuredContent.uid, r.structuredContent.gid], [1000, 1000]);
  assert.equal(Math.floor(r.structuredContent.mtime_ns / 1e9), r.structuredContent.mtime);
  r = await call(client, 'move', { source: 'app.txt', destination: '/runtime/moved/app.txt' });
  assert.equal(r.isError, false, text(r));
  r = await call(client, 'read_file', { path: '/runtime/moved/app.txt' });
  assert.equal(r.structuredContent.content, 'ab');
  r = await call(client, 'remove', { path: '/runtime/moved', recursive: true });
  assert.equal(r.isError, false, text(r));
  r = await call(client, 'read_file', { path: 'b.txt', bogus: 1 });
  assert.equal(r.isError, true);
  assert.match(text(r), /unknown argument "bogus"/);

  r = await call(client, 'computer_info');
  assert.equal(r.structuredContent.state, 'running');
  assert.equal(r.structuredContent.generation, 1);
  assert.equal(r.structuredContent.image, IMAGE);
  assert.equal(r.structuredContent.network, 'none');

  r = await call(client, 'checkpoint');
  assert.equal(r.isError, false, text(r));
  assert.match(r.structuredContent.digest, /^[0-9a-f]{64}$/);
  r = await call(client, 'list_checkpoints');
  assert.equal(r.structuredContent.checkpoints.length, 1);
  r = await call(client, 'recover');
  assert.equal(r.isError, true, 'a running computer has nothing to recover');
  assert.match(text(r), /nothing to recover/);
});

test('background processes: start, read, send input, list, kill', async () => {
  let r = await call(client, 'start_process', { command: 'echo ready; read x; echo "got $x"; echo oops >&2; exit 4' });
  assert.equal(r.isError, false, text(r));
  const id = r.structuredContent.id;
  const until = async (pred) => {
    for (let i = 0; i < 50; i++) {
      const o = await call(client, 'read_process_output', { id });
      if (pred(o.structuredContent)) return o.structuredContent;
      await new Promise((res) => setTimeout(res, 200));
    }
    assert.fail('background process did not get there');
  };
  let o = await until((s) => s.stdout === 'ready\n');
  assert.equal(o.running, true);
  assert.equal(o.exit_code, null);
  r = await call(client, 'send_input', { id, text: 'line\n' });
  assert.equal(r.structuredContent.bytes, 5);
  o = await until((s) => !s.running);
  assert.equal(o.exit_code, 4);
  assert.equal(o.stdout, 'ready\ngot line\n');
  assert.equal(o.stderr, 'oops\n');
  r = await call(client, 'read_process_output', { id, stdout_offset: o.stdout_next_offset, stderr_offset: 5 });
  assert.equal(r.structuredContent.stdout, '');
  r = await call(client, 'send_input', { id, text: 'late\n' });
  assert.equal(r.isError, true);
  assert.match(text(r), /has exited/);

  r = await call(client, 'start_process', { argv: ['sleep', '600'] });
  const sleeper = r.structuredContent.id;
  r = await call(client, 'list_processes');
  const listed = Object.fromEntries(r.structuredContent.processes.map((p) => [p.id, p]));
  assert.equal(listed[id].running, false);
  assert.equal(listed[sleeper].running, true);
  assert.match(listed[sleeper].command, /sleep 600/);
  r = await call(client, 'kill_process', { id: sleeper });
  assert.equal(r.structuredContent.signal, 'TERM');
  for (let i = 0; i < 50; i++) {
    r = await call(client, 'list_processes');
    if (!r.structuredContent.processes.find((p) => p.id === sleeper).running) break;
    await new Promise((res) => setTimeout(res, 200));
  }
  assert.equal(r.structuredContent.processes.find((p) => p.id === sleeper).running, false);
  r = await call(client, 'start_process', { command: 'sleep 700' });
  const hard = r.structuredContent.id;
  r = await call(client, 'kill_process', { id: hard, signal: 'KILL' });
  assert.equal(r.isError, false, text(r));
  r = await call(client, 'read_process_output', { id: hard });
  assert.equal(r.structuredContent.running, false, 'KILL ends the tree before it answers');
  r = await call(client, 'read_process_output', { id: 'p../../x' });
  assert.equal(r.isError, true);
  assert.match(text(r), /not a process id/);
  r = await call(client, 'kill_process', { id: 'pAAAAAA' });
  assert.equal(r.isError, true);
  assert.match(text(r), /no process/);
});

test('10 MB of output comes back capped as head + tail', async () => {
  const r = await call(client, 'run', { command: 'head -c 10000000 /dev/zero | tr "\\0" a; echo END' });
  const s = r.structuredContent;
  assert.equal(s.stdout_bytes, 10000004);
  assert.ok(s.stdout_omitted > 9900000);
  assert.match(s.stdout, /\[\d+ bytes omitted\]/);
  assert.ok(s.stdout.endsWith('END\n'));
  assert.ok(s.stdout.length < 70000);
});

test('a binary file goes in and out unchanged', async () => {
  const bytes = randomBytes(300000);
  let r = await call(client, 'write_file', { path: 'bin/blob', content: bytes.toString('base64'), encoding: 'base64' });
  assert.equal(r.structuredContent.bytes_written, bytes.length);
  r = await call(client, 'run', { command: 'sha256sum bin/blob' });
  assert.equal(r.structuredContent.stdout.split(' ')[0], createHash('sha256').update(bytes).digest('hex'));
  r = await call(client, 'read_file', { path: 'bin/blob' });
  assert.equal(r.structuredContent.encoding, 'base64');
  assert.ok(Buffer.from(r.structuredContent.content, 'base64').equals(bytes));
});

test('the largest reads and outputs stay within what the SDK takes in one message', async () => {
  // The SDK's stdio client closes the connection on a message over 10 MiB:
  // an 8 MiB read comes back in pieces, a binary flood in the output as an
  // answer without its text copy or a clear error, and the server goes on.
  let r = await call(client, 'run', { command: 'head -c 6000000 /dev/urandom | base64 -w 76 > big.txt; sha256sum big.txt' });
  const want = r.structuredContent.stdout.split(' ')[0];
  const parts = [];
  let offset = 0;
  for (let i = 0; i < 10; i++) {
    r = await call(client, 'read_file', { path: 'big.txt', offset, length: 8388608 });
    assert.equal(r.structuredContent.encoding, 'text');
    parts.push(Buffer.from(r.structuredContent.content));
    offset += r.structuredContent.bytes;
    if (r.structuredContent.eof) break;
  }
  assert.ok(parts.length > 1, 'one answer held more than fits a message');
  assert.equal(createHash('sha256').update(Buffer.concat(parts)).digest('hex'), want);
  // random bytes: 1 MiB kept, each invalid byte a U+FFFD: both copies fit
  r = await call(client, 'run', { command: 'head -c 4000000 /dev/urandom', max_output_bytes: 1048576 });
  assert.equal(r.structuredContent.stdout_bytes, 4000000);
  assert.ok(text(r).length > 1000000);
  // control characters: 1 MiB kept is 6 MB of JSON: the text copy goes
  r = await call(client, 'run', { command: 'head -c 3000000 /dev/zero | tr "\\0" "\\001"', max_output_bytes: 1048576 });
  assert.equal(r.isError, false);
  assert.equal(r.structuredContent.stdout_bytes, 3000000);
  assert.match(text(r), /text copy \(\d+ bytes\) is left out/);
  // the same on stdout and stderr: 12 MB even alone, a clear error
  r = await call(client, 'run', { command: 'head -c 3000000 /dev/zero | tr "\\0" "\\001" | tee /dev/stderr',
    max_output_bytes: 1048576 });
  assert.equal(r.isError, true);
  assert.match(text(r), /more than the 9 MiB an MCP client takes in one message: ask for less/);
  r = await call(client, 'run', { command: 'rm big.txt; echo still here' });
  assert.equal(r.structuredContent.stdout, 'still here\n');
});

test('20 concurrent calls', async () => {
  const rs = await Promise.all(Array.from({ length: 20 }, (_, i) =>
    call(client, 'run', { command: `sleep 0.2; echo ${i}` })));
  rs.forEach((r, i) => assert.equal(r.structuredContent.stdout, `${i}\n`));
});

test('a long command reports progress', async () => {
  const seen = [];
  const r = await call(client, 'run', { command: 'sleep 2.5; echo done' }, { onprogress: (p) => seen.push(p) });
  assert.equal(r.structuredContent.stdout, 'done\n');
  assert.ok(seen.length >= 1, 'at least one progress notification');
  assert.ok(seen[0].progress >= 1);
});

test('cancelling a long command: the server keeps serving, the computer keeps running and its files', async () => {
  await call(client, 'write_file', { path: 'kept.txt', content: 'written before the cancel' });
  const ac = new AbortController();
  const started = Date.now();
  const p = call(client, 'run', { command: 'echo $$ > /runtime/cancelled.pid; sleep 300' }, { signal: ac.signal });
  setTimeout(() => ac.abort('enough'), 1500);
  await assert.rejects(p);
  await client.ping();
  // brig-init ends the command's tree inside the computer (certain): no
  // stop, no recover; the very next call runs in the same computer.
  let r = await call(client, 'run', { command: 'echo up' });
  assert.equal(r.isError, false, text(r));
  assert.equal(r.structuredContent.stdout, 'up\n');
  r = await call(client, 'read_file', { path: 'kept.txt' });
  assert.equal(r.isError, false, text(r));
  assert.equal(r.structuredContent.content, 'written before the cancel');
  // The cancelled command is gone, not left running.
  for (let i = 0; i < 20; i++) {
    r = await call(client, 'run', { command: 'kill -0 "$(cat /runtime/cancelled.pid)" 2>/dev/null && echo alive || echo gone' });
    if (r.structuredContent.stdout === 'gone\n') break;
    await new Promise((res) => setTimeout(res, 250));
  }
  assert.equal(r.structuredContent.stdout, 'gone\n');
  r = await call(client, 'computer_info');
  assert.equal(r.isError, false, text(r));
  assert.ok(Date.now() - started < 60000);
});

test('a client that disconnects mid-call leaves nothing running', async () => {
  const child = spawn(BRIG, serverArgs('gone'), { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = reader(child);
  child.stdin.write('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",' +
    '"capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}\n');
  await lines.next();
  child.stdin.write('{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"start_process","arguments":' +
    '{"command":"sleep 400"}}}\n');
  child.stdin.write('{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run","arguments":' +
    '{"command":"echo started; sleep 300"},"_meta":{"progressToken":"t"}}}\n');
  // Progress arrives once the command runs (the computer exists by then).
  for (;;) {
    const m = await lines.next();
    if (m.method === 'notifications/progress') break;
  }
  const name = computers().find((n) => execFileSync('docker', ['inspect', '-f',
    '{{index .Config.Labels "brig.session"}}', n], { encoding: 'utf8' }).trim() === 'gone');
  assert.ok(name, 'the computer of session "gone"');
  child.stdin.end();
  const code = await new Promise((res) => child.on('exit', (c) => res(c)));
  assert.equal(code, 0, 'brig mcp exits cleanly when stdin closes');
  let running = false;
  try {
    const top = execFileSync('docker', ['top', name], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    running = /sleep [34]00/.test(top);
  } catch { /* not running: nothing to list */ }
  assert.equal(running, false, 'neither the call\'s command nor the background process may outlive the client');
});

test('the MCP Inspector\'s CLI lists the tools and calls one', async () => {
  const inspector = join(import.meta.dirname, 'node_modules', '.bin', 'mcp-inspector');
  const cli = (...args) => JSON.parse(execFileSync(inspector, ['--cli', BRIG, ...serverArgs('inspector'), ...args],
    { encoding: 'utf8', env: { ...process.env }, stdio: ['ignore', 'pipe', 'inherit'], timeout: 120000 }));
  const listed = cli('--method', 'tools/list');
  assert.equal(listed.tools.length, 18);
  const r = cli('--method', 'tools/call', '--tool-name', 'run', '--tool-arg', 'command=echo from the inspector');
  assert.equal(r.isError, false);
  assert.equal(r.structuredContent.stdout, 'from the inspector\n');
});

test('background processes end when the client leaves; the computer keeps running', async () => {
  const child = spawn(BRIG, serverArgs('bg'), { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = reader(child);
  child.stdin.write('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"start_process","arguments":' +
    '{"command":"sleep 500"}}}\n');
  let m;
  do m = await lines.next(); while (m.method); // the log of the computer's creation comes first
  assert.equal(m.result.isError, false, JSON.stringify(m));
  const name = computers().find((n) => execFileSync('docker', ['inspect', '-f',
    '{{index .Config.Labels "brig.session"}}', n], { encoding: 'utf8' }).trim() === 'bg');
  assert.match(execFileSync('docker', ['top', name], { encoding: 'utf8' }), /sleep 500/);
  child.stdin.end();
  assert.equal(await new Promise((res) => child.on('exit', (c) => res(c))), 0);
  assert.doesNotMatch(execFileSync('docker', ['top', name], { encoding: 'utf8' }), /sleep 500/);
});

// ---- raw JSON-RPC over a brig mcp process ----

function reader(child) {
  let buf = '';
  const queue = [];
  const waiters = [];
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (d) => {
    buf += d;
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      const msg = JSON.parse(line); // anything but JSON-RPC on stdout fails here
      if (waiters.length) waiters.shift()(msg); else queue.push(msg);
    }
  });
  return { next: () => (queue.length ? Promise.resolve(queue.shift()) : new Promise((res) => waiters.push(res))) };
}

async function raw(requests, answers) {
  const child = spawn(BRIG, serverArgs('raw'), { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = reader(child);
  for (const r of requests) child.stdin.write(r + '\n');
  const out = [];
  while (out.length < answers) out.push(await lines.next());
  child.stdin.end();
  const code = await new Promise((res) => child.on('exit', (c) => res(c)));
  assert.equal(code, 0);
  return out;
}
