// The browser client's JSDoc types are checked against @langchain/protocol
// 0.0.21 by `tsc --checkJs` in scripts/test. That check must be able to
// fail: a copy of the client with one field misspelled the seed's way does not
// type-check, and the error names the field.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync, rmSync, existsSync } from 'node:fs';
import path from 'node:path';
import { repoRoot } from './lib/harness.mjs';

const dir = path.join(repoRoot, 'protocol', 'js');

function typecheck(mutate, source = readFileSync(path.join(dir, 'threadcast.js'), 'utf8')) {
  const name = `.misspelled-${process.pid}`;
  const file = path.join(dir, `${name}.js`);
  const cfg = path.join(dir, `${name}.tsconfig.json`);
  const base = JSON.parse(readFileSync(path.join(dir, 'tsconfig.json'), 'utf8'));
  writeFileSync(file, mutate(source));
  writeFileSync(cfg, JSON.stringify({ ...base, files: [path.basename(file)] }));
  try {
    return spawnSync(path.join(dir, 'node_modules', '.bin', 'tsc'), ['-p', cfg], { cwd: dir, encoding: 'utf8' });
  } finally {
    rmSync(file, { force: true });
    rmSync(cfg, { force: true });
  }
}

test('a misspelled protocol field in the client fails the type check', () => {
  assert.ok(existsSync(path.join(dir, 'node_modules', '.bin', 'tsc')), 'scripts/test installs protocol/js first');
  const same = typecheck((src) => src);
  assert.equal(same.status, 0, same.stdout + same.stderr);
  const read = typecheck((src) => src.replace('sub.id = r.subscription_id;', 'sub.id = r.subscriptionId;'));
  assert.notEqual(read.status, 0);
  assert.match(read.stdout, /subscriptionId/);
  const sent = typecheck((src) => src.replace('const params = { run_id: this.runId', 'const params = { runId: this.runId'));
  assert.notEqual(sent.status, 0);
  assert.match(sent.stdout, /run_id/);
  // An application's command params are checked too.
  const app = `import { connect } from './threadcast.js';
const conn = connect('ws://x', 't');
await conn.command('run.start', { assistant_id: 'agent', input: null });
await conn.command('input.respond', { namespace: [], interrupt_id: 'i', response: 1 });
`;
  const good = typecheck((src) => src, app);
  assert.equal(good.status, 0, good.stdout + good.stderr);
  const wrong = typecheck((src) => src.replace("{ assistant_id: 'agent'", "{ assistantId: 'agent'"), app);
  assert.notEqual(wrong.status, 0);
  assert.match(wrong.stdout, /assistant_id/);
});
