// mcp_bench.mjs — a `brig mcp` tool call running `true`, measured at the
// official MCP SDK client (Client + StdioClientTransport), beside
// `docker exec` of the same command in the same computer: median and p95.
//
//   BRIG_BIN=build/brig node bench/mcp_bench.mjs [-n 200]
//
// Uses tests/mcp/node_modules (run `npm ci --prefix tests/mcp` first), the
// image brig-test:local and a store under a temporary directory; the computer
// is labelled brig.bench=1 and destroyed at the end. Table on stdout.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createRequire } from 'node:module';

const require = createRequire(join(import.meta.dirname, '..', 'tests', 'mcp', 'package.json'));
const { Client } = await import(require.resolve('@modelcontextprotocol/sdk/client/index.js'));
const { StdioClientTransport } = await import(require.resolve('@modelcontextprotocol/sdk/client/stdio.js'));

const n = Number(process.argv[process.argv.indexOf('-n') + 1]) || 200;
const BRIG = process.env.BRIG_BIN || 'build/brig';
const dir = mkdtempSync(join(tmpdir(), 'brig-mcp-bench-'));
const session = `bench-${process.pid}`;
const transport = new StdioClientTransport({
  command: BRIG,
  args: ['mcp', '--ns', 'bench', '--agent', 'mcp', '--session', session, '--store', join(dir, 'store.db'),
    '--image', 'brig-test:local', '--label', 'brig.bench=1'],
  env: { ...process.env }, stderr: 'ignore',
});
const client = new Client({ name: 'brig-mcp-bench', version: '1' });
let name;
try {
  await client.connect(transport);
  const info = await client.callTool({ name: 'computer_info', arguments: {} });
  name = info.structuredContent.name;
  const mcp = [], dock = [];
  for (let i = 0; i < 10; i++) await client.callTool({ name: 'run', arguments: { argv: ['true'] } });
  for (let i = 0; i < n; i++) {
    let t = performance.now();
    const r = await client.callTool({ name: 'run', arguments: { argv: ['true'] } });
    mcp.push(performance.now() - t);
    if (r.isError || r.structuredContent.exit_code !== 0) throw new Error('run true failed');
    t = performance.now();
    const d = spawnSync('docker', ['exec', '-u', '1000', name, 'true']);
    dock.push(performance.now() - t);
    if (d.status !== 0) throw new Error('docker exec true failed');
  }
  const q = (a, p) => [...a].sort((x, y) => x - y)[Math.min(a.length - 1, Math.floor(p * a.length))];
  console.log(`${'what'.padEnd(34)} ${'median ms'.padStart(10)} ${'p95 ms'.padStart(10)}   (n=${n})`);
  for (const [label, a] of [['brig mcp tools/call run `true`', mcp], ['docker exec (CLI) `true`', dock]])
    console.log(`${label.padEnd(34)} ${q(a, 0.5).toFixed(2).padStart(10)} ${q(a, 0.95).toFixed(2).padStart(10)}`);
} finally {
  await client.close().catch(() => {});
  if (name) execFileSync(BRIG, ['destroy', name], { stdio: 'ignore', env: { ...process.env, BRIG_STORE: join(dir, 'store.db') } });
  rmSync(dir, { recursive: true, force: true });
}
