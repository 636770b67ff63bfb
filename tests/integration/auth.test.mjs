// Authentication and authorization: the refusal matrix of issue 7.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startRedis, startThreadcast, connect, stopAll, waitUntil, sse } from './lib/harness.mjs';

const b64u = (x) => Buffer.from(x).toString('base64url');
function sign(claims, key, alg = 'RS256', kid = undefined) {
  const head = b64u(JSON.stringify({ alg, typ: 'JWT', ...(kid ? { kid } : {}) }));
  const body = b64u(JSON.stringify(claims));
  const data = `${head}.${body}`;
  const sig = alg === 'HS256' ? crypto.createHmac('sha256', key).update(data).digest()
    : alg === 'none' ? Buffer.alloc(0)
    : alg === 'ES256' ? crypto.sign('sha256', Buffer.from(data), { key, dsaEncoding: 'ieee-p1363' })
    : crypto.sign('sha256', Buffer.from(data), key);
  return `${data}.${b64u(sig)}`;
}

const { publicKey, privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
const other = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
const now = () => Math.floor(Date.now() / 1000);
let redis, tc, pubPem;

before(async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'tc-auth-'));
  pubPem = publicKey.export({ type: 'spki', format: 'pem' });
  writeFileSync(path.join(dir, 'pub.pem'), pubPem);
  redis = await startRedis();
  tc = await startThreadcast({ redisUrl: redis.url, env: { THREADCAST_AUTH: 'jwt',
    THREADCAST_JWT_KEY: path.join(dir, 'pub.pem'), THREADCAST_ALLOWED_ORIGINS: 'https://app.example' } });
  await tc.ready();
});
after(async () => {
  const reports = tc.sanitizerReports();
  await stopAll();
  await redis.cleanup();
  assert.deepEqual(reports, [], tc.stderr);
});

const good = (extra = {}) => sign({ exp: now() + 600, threads: ['t-*', 'exact'], ...extra }, privateKey);
const wsWith = (thread, token, opts = {}) => connect(
  `ws://127.0.0.1:${tc.port}/threads/${thread}/stream${token ? `?access_token=${token}` : ''}`, opts);

test('refusals before the upgrade: no token, bad signature, expired, wrong algorithm → 401; wrong thread → 403', async () => {
  const cases = [
    [null, 401],
    [sign({ exp: now() + 600, threads: ['*'] }, other.privateKey), 401],
    [sign({ exp: now() - 5, threads: ['*'] }, privateKey), 401],
    [sign({ threads: ['*'] }, privateKey), 401],
    [sign({ exp: now() + 600, threads: ['*'] }, pubPem, 'HS256'), 401], // the public key as an HMAC secret
    [sign({ exp: now() + 600, threads: ['*'] }, null, 'none'), 401],
    ['not.a.token', 401],
    [good(), 403], // t-* and exact do not cover "other"
  ];
  for (const [token, status] of cases) {
    await assert.rejects(wsWith('other', token), (e) => e.status === status, `${status} for ${token}`);
  }
  const r = await tc.http('/threads/other/stream', { headers: { accept: 'text/event-stream', authorization: `Bearer ${good()}` } });
  assert.equal(r.status, 403);
  assert.match((await r.json()).message, /does not grant thread "other"/);
});

test('a valid token reads its threads, by query parameter or Authorization header', async () => {
  const a = await wsWith('t-1', good());
  assert.equal((await a.request({ id: 1, method: 'subscription.subscribe', params: { channels: ['tasks'] } })).type, 'success');
  const b = await connect(`ws://127.0.0.1:${tc.port}/threads/exact/stream`, { headers: { authorization: `Bearer ${good()}` } });
  assert.equal((await b.request({ id: 1, method: 'nope' })).error, 'unknown_command');
  const s = await sse(`http://127.0.0.1:${tc.port}/threads/t-2/stream?channels=tasks&access_token=${good()}`, { headers: { accept: 'text/event-stream' } });
  assert.equal(s.status, 200);
  s.close();
  await a.close();
  await b.close();
});

test('a read-only token may not send runtime commands: permission_denied', async () => {
  const c = await wsWith('t-3', good());
  const r = await c.request({ id: 1, method: 'run.start', params: { assistantId: 'a', input: 'x' } });
  assert.equal(r.error, 'permission_denied');
  const cmd = await tc.http('/threads/t-3/commands', { method: 'POST', headers: { authorization: `Bearer ${good()}` },
    body: JSON.stringify({ id: 2, method: 'state.get', params: { namespace: [] } }) });
  assert.equal((await cmd.json()).error, 'permission_denied');
  const noToken = await tc.http('/threads/t-3/commands', { method: 'POST', body: '{}' });
  assert.equal(noToken.status, 401);
  // With the claim the command goes through to the bridge (no worker here:
  // the bridge refuses it for that reason, not for permission).
  const d = await wsWith('t-3', good({ commands: true }));
  const r3 = await d.request({ id: 3, method: 'state.get', params: { namespace: [] } });
  assert.equal(r3.type, 'error');
  assert.match(r3.message, /no worker/);
  await c.close();
  await d.close();
});

test('a token that expires on an open connection closes it with 1008', async () => {
  const c = await wsWith('t-4', sign({ exp: now() + 2, threads: ['t-4'] }, privateKey));
  const { code, reason } = await c.closed;
  assert.equal(code, 1008);
  assert.match(reason, /expired/);
});

test('browser Origins outside the allowed list are refused with 403', async () => {
  await assert.rejects(wsWith('t-5', good(), { origin: 'https://evil.example' }), (e) => e.status === 403);
  const ok = await wsWith('t-5', good(), { origin: 'https://app.example' });
  await ok.close();
});

test('starting with auth on but no key is refused at start-up with exit 2', async () => {
  const { spawnSync } = await import('node:child_process');
  const { threadcastBin } = await import('./lib/harness.mjs');
  const r = spawnSync(threadcastBin, [], { env: { ...process.env, THREADCAST_AUTH: 'jwt', THREADCAST_JWT_KEY: '' }, encoding: 'utf8' });
  assert.equal(r.status, 2);
  assert.match(r.stderr, /--jwt-key/);
  const bad = spawnSync(threadcastBin, ['--jwt-key', '/nonexistent'], { env: { ...process.env, THREADCAST_AUTH: 'jwt' }, encoding: 'utf8' });
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /cannot read/);
});

test('a JWKS file: RSA, EC P-256 and oct keys chosen by kid; unusable keys skipped; rotation on change and SIGHUP', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'tc-jwks-'));
  const file = path.join(dir, 'jwks.json');
  const rsa = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  const ec = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const p384 = crypto.generateKeyPairSync('ec', { namedCurve: 'P-384' });
  const secret = crypto.randomBytes(32);
  const jwk = (k, extra) => ({ ...k.publicKey.export({ format: 'jwk' }), ...extra });
  writeFileSync(file, JSON.stringify({ keys: [
    jwk(rsa, { kid: 'rsa1', use: 'sig', alg: 'RS256' }),
    jwk(ec, { kid: 'ec1' }),
    { kty: 'oct', kid: 'hs1', k: b64u(secret) },
    jwk(p384, { kid: 'p384' }),                 // ES384: not taken
    jwk(other, { kid: 'enc1', use: 'enc' }),    // not for signatures
  ] }));
  const jt = await startThreadcast({ redisUrl: redis.url, env: { THREADCAST_AUTH: 'jwt', THREADCAST_JWT_JWKS: file } });
  await jt.ready();
  assert.deepEqual(jt.logs.find((l) => l.msg === 'verifying keys loaded'), { ...jt.logs.find((l) => l.msg === 'verifying keys loaded'), keys: 3, skipped: 2 });
  const claims = () => ({ exp: now() + 600, threads: ['j-*'] });
  const open = (token) => connect(`ws://127.0.0.1:${jt.port}/threads/j-1/stream?access_token=${token}`);
  const refused = (token) => open(token).then(() => ({ status: 101 }), (e) => ({ status: e.status, message: JSON.parse(e.body).message }));
  for (const token of [sign(claims(), rsa.privateKey, 'RS256', 'rsa1'), sign(claims(), ec.privateKey, 'ES256', 'ec1'),
    sign(claims(), secret, 'HS256', 'hs1'), sign(claims(), rsa.privateKey, 'RS256')]) {
    const c = await open(token);
    assert.equal((await c.request({ id: 1, method: 'subscription.subscribe', params: { channels: ['tasks'] } })).type, 'success');
    await c.close();
  }
  const cases = [
    [sign(claims(), rsa.privateKey, 'RS256', 'ec1'), /signed with RS256; this server accepts only ES256/], // kid of another key type
    [sign(claims(), other.privateKey, 'RS256', 'rsa1'), /signature does not verify/],
    [sign(claims(), rsa.privateKey, 'RS256', 'nope'), /key id "nope"/],
    [sign(claims(), p384.privateKey, 'ES256', 'p384'), /key id "p384"/],
    [sign(claims(), rsa.publicKey.export({ type: 'spki', format: 'pem' }), 'HS256', 'rsa1'), /accepts only RS256/],
    [sign(claims(), null, 'none'), /signed with none/],
  ];
  for (const [token, why] of cases) {
    const r = await refused(token);
    assert.equal(r.status, 401, `${why}`);
    assert.match(r.message, why);
  }
  // Rotation: rsa1 leaves, rsa2 comes; SIGHUP re-reads at once.
  const rsa2 = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  writeFileSync(file, JSON.stringify({ keys: [jwk(rsa2, { kid: 'rsa2' })] }));
  jt.proc.kill('SIGHUP');
  await jt.waitLog((l) => l.msg === 'verifying keys reloaded' && l.keys === 1);
  assert.equal((await refused(sign(claims(), rsa.privateKey, 'RS256', 'rsa1'))).status, 401);
  await (await open(sign(claims(), rsa2.privateKey, 'RS256', 'rsa2'))).close();
  // A broken file keeps the keys in use; a good one is picked up by itself.
  writeFileSync(file, '{"keys": [');
  jt.proc.kill('SIGHUP');
  await jt.waitLog((l) => l.msg === 'verifying keys not reloaded; the previous ones stay');
  await (await open(sign(claims(), rsa2.privateKey, 'RS256', 'rsa2'))).close();
  writeFileSync(file, JSON.stringify({ keys: [jwk(rsa2, { kid: 'rsa2' }), jwk(ec, { kid: 'ec2' })] }));
  await jt.waitLog((l) => l.msg === 'verifying keys reloaded' && l.keys === 2, 12000);
  await (await open(sign(claims(), ec.privateKey, 'ES256', 'ec2'))).close();
  await jt.stop();
  assert.deepEqual(jt.sanitizerReports(), [], jt.stderr);
});

test('the REST API: thread routes need the thread, the others every thread; changes need "commands"', async () => {
  const call = (p, token, init = {}) => tc.http(p, { ...init, headers: { 'content-type': 'application/json',
    ...(token ? { authorization: `Bearer ${token}` } : {}), ...init.headers } });
  const all = sign({ exp: now() + 600, threads: ['*'], commands: true }, privateKey);
  const allRead = sign({ exp: now() + 600, threads: ['*'], commands: false }, privateKey);
  assert.equal((await call('/threads', null, { method: 'POST', body: '{}' })).status, 401);
  // A token for some threads may not create one without an id, search, or use the store.
  assert.equal((await call('/threads', good({ commands: true }), { method: 'POST', body: '{}' })).status, 403);
  assert.equal((await call('/threads/search', good(), { method: 'POST', body: '{}' })).status, 403);
  assert.equal((await call('/store/items?namespace=a&key=b', good())).status, 403);
  // Every thread, and the right to change things: allowed.
  const created = await call('/threads', all, { method: 'POST', body: JSON.stringify({ thread_id: 't-rest' }) });
  assert.equal(created.status, 200, await created.clone().text());
  assert.equal((await created.json()).thread_id, 't-rest');
  // Reading needs no "commands"; changing does, with an error (its message as text) saying so.
  assert.equal((await call('/threads/search', allRead, { method: 'POST', body: '{}' })).status, 200);
  const patch = await call('/threads/t-rest', allRead, { method: 'PATCH', body: JSON.stringify({ metadata: { x: 1 } }) });
  assert.equal(patch.status, 403);
  assert.match(await patch.text(), /commands/);
  // A thread route with a token for that thread (t-*): its own thread, not another.
  assert.equal((await call('/threads/t-rest', good())).status, 200);
  assert.equal((await call('/threads/other', good())).status, 403);
});
