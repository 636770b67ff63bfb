// Redis over TLS (rediss://) with ACL users, against real redis-servers that
// have a TLS port and no plain one, with certificates made here (lib/tls.mjs):
// events stream end to end (threadcast-produce → Redis → the gateway's command
// and pub/sub links → a WebSocket), a REST run goes through the LangGraph
// worker, Sentinels are asked over TLS with their own password; and what must
// be refused is, each with its precise reason in the log and /readyz failing:
// a certificate from another CA, one for another host, no client certificate
// where Redis wants one, a wrong password.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import {
  startRedis, startThreadcast, startWorker, produce, connect, stopAll, waitUntil, sleep, freePort, track,
} from './lib/harness.mjs';
import { makeCertificates } from './lib/tls.mjs';
import { graphsModule, question, transcript, expectedTranscript, jsonResponse } from './lib/rest.mjs';
import { redisOptions } from '../../src/worker/loops.js';

// The default user is off: every client must log in as alice.
const ACL = ['--user', 'default', 'off', '--user', 'alice', 'on', '>s3cret', '~*', '&*', '+@all'];
const ALL = ['messages', 'tools', 'lifecycle', 'values', 'custom', 'updates'];

let certs;
let redis; // wants a client certificate (tls-auth-clients yes) and alice
const servers = [];

before(async () => {
  certs = makeCertificates();
  redis = await startRedis({ tls: { ...certs.server, ca: certs.ca, authClients: 'yes' }, extra: ACL });
  servers.push(redis);
});

after(async () => {
  await stopAll();
  for (const r of servers) await r.cleanup();
  rmSync(certs.dir, { recursive: true, force: true });
});

/** The gateway's (and the worker's) TLS environment: our CA, and the client certificate unless noCert. */
const tlsEnv = ({ noCert = false } = {}) => ({
  THREADCAST_REDIS_TLS_CA: certs.ca,
  ...(noCert ? {} : { THREADCAST_REDIS_TLS_CERT: certs.client.cert, THREADCAST_REDIS_TLS_KEY: certs.client.key }),
});
/** threadcast-produce's TLS options. */
const tlsArgs = () => ['--redis-tls-ca', certs.ca, '--redis-tls-cert', certs.client.cert, '--redis-tls-key', certs.client.key];
const aliceUrl = (host = '127.0.0.1', port = redis.port) => `rediss://alice:s3cret@${host}:${port}`;
const event = (i) => ({ method: 'custom', params: { namespace: [], timestamp: 1, data: { i } } });

const sanitizer = /ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:/;

/** Stops a gateway and asserts its sanitizer build reported nothing, exit included. */
async function stopClean(tc) {
  await tc.stop();
  assert.deepEqual(tc.sanitizerReports(), [], tc.stderr);
}

/** threadcast-produce (its sanitizer build reports nothing, even when it fails). */
async function produceClean(...args) {
  const p = await produce(...args);
  assert.doesNotMatch(p.stderr, sanitizer, p.stderr);
  return p;
}

/** A gateway that must not come up: waits for its log to name why, then checks it stays unready. */
async function refused(tc, pred, what) {
  const line = await waitUntil(() => tc.logs.find(pred), 15000, what);
  // Retried with backoff, and refused each time, not only the first.
  await waitUntil(() => tc.logs.filter(pred).length >= 2, 15000, `${what}, again`);
  const r = await tc.http('/readyz');
  assert.equal(r.status, 503);
  assert.notEqual((await r.json()).redis, 'up');
  assert.equal(tc.exitCode, null, 'the gateway is still running');
  assert.deepEqual(tc.sanitizerReports(), [], tc.stderr);
  return line;
}

test('events stream over TLS end to end, as an ACL user with a client certificate', async () => {
  // localhost: the certificate's DNS name is checked (and sent as SNI).
  const tc = await startThreadcast({ redisUrl: aliceUrl('localhost'), env: tlsEnv() });
  await tc.ready();
  for (const link of ['commands', 'pubsub']) {
    assert.ok(tc.logs.some((l) => l.msg === 'redis connected' && l.link === link), `the ${link} link is up`);
  }
  assert.ok(!tc.stderr.includes('s3cret'), 'the password is not logged');
  assert.match(tc.logs.find((l) => l.msg === 'listening').redis, /^rediss:\/\/alice:\*\*\*@localhost:/);

  const live = await connect(tc.url('tls-a'));
  assert.equal((await live.request({ id: 1, method: 'subscription.subscribe', params: { channels: ALL } })).type, 'success');
  // 127.0.0.1: the certificate's IP address is checked.
  const events = Array.from({ length: 50 }, (_, i) => event(i));
  const { seqs } = await produceClean(aliceUrl(), 'tls-a', events, { args: tlsArgs() });
  assert.equal(seqs.length, 50);
  // Live, through the pub/sub link.
  await waitUntil(() => live.events.length >= 50, 10000, 'the live events');
  assert.deepEqual(live.events.map((e) => e.params.data.i), events.map((_, i) => i));

  // Replayed, through the command link: a second subscriber from the start.
  const late = await connect(tc.url('tls-a'));
  assert.equal((await late.request({ id: 1, method: 'subscription.subscribe', params: { channels: ALL } })).type, 'success');
  await waitUntil(() => late.events.length >= 50, 10000, 'the replayed events');
  assert.deepEqual(late.events.map((e) => e.params.data.i), events.map((_, i) => i));

  // A large event crosses the pump in many records, each way.
  const big = { method: 'custom', params: { namespace: [], timestamp: 1, data: { i: 'big', pad: 'x'.repeat(200000) } } };
  await produceClean(aliceUrl(), 'tls-a', [big], { args: tlsArgs() });
  await waitUntil(() => live.events.length === 51, 10000, 'the large event');
  assert.equal(live.events[50].params.data.pad.length, 200000);
  await live.close();
  await late.close();
  await stopClean(tc);
});

test('Redis restarting: the links reconnect over TLS and events flow again', async () => {
  // appendonly: the thread's events (and so its seqs) survive the restart.
  const own = await startRedis({ tls: { ...certs.server, ca: certs.ca }, appendonly: true });
  servers.push(own);
  const tc = await startThreadcast({ redisUrl: own.url, env: tlsEnv(), args: ['--redis-backoff-max', '300'] });
  await tc.ready();
  const c = await connect(tc.url('tls-r'));
  assert.equal((await c.request({ id: 1, method: 'subscription.subscribe', params: { channels: ALL } })).type, 'success');
  await produceClean(own.url, 'tls-r', [event(1)], { args: tlsArgs() });
  await waitUntil(() => c.events.length === 1, 10000, 'the first event');

  await own.stop();
  await waitUntil(async () => (await tc.http('/readyz')).status === 503, 10000, 'unready without Redis');
  const again = await startRedis({ tls: { ...certs.server, ca: certs.ca }, appendonly: true, port: own.port, dir: own.dir });
  servers.push(again);
  await tc.ready(20000);
  // The subscription is made again on the new pub/sub link.
  await waitUntil(async () => {
    await produceClean(own.url, 'tls-r', [event(2)], { args: tlsArgs() });
    return c.events.some((e) => e.params.data.i === 2);
  }, 15000, 'an event after the restart');
  assert.ok(tc.logs.some((l) => l.msg === 'redis disconnected'), tc.stderr);
  await c.close();
  await stopClean(tc);
});

test('a REST run goes through the LangGraph worker over TLS', async () => {
  const tc = await startThreadcast({ redisUrl: aliceUrl(), env: tlsEnv() });
  await tc.ready();
  const worker = await startWorker(aliceUrl('localhost'), { name: 'tls-w', args: ['--graphs', graphsModule], env: tlsEnv() });
  const q = 'over TLS?';
  const res = await tc.http('/runs/wait', { method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ assistant_id: 'agent', input: question(q) }) });
  assert.deepEqual(transcript(await jsonResponse(res)), expectedTranscript(q));
  assert.doesNotMatch(worker.stderr, /"level":"(warn|error)"/, worker.stderr);
  await worker.kill('SIGTERM');
  await stopClean(tc);
});

test('the worker reads a Redis URL as the gateway does', () => {
  assert.deepEqual(redisOptions('redis://h:1'), {});
  assert.deepEqual(redisOptions('redis://secret@h'), { username: '', password: 'secret' });
  assert.deepEqual(redisOptions('rediss://p%40ss@h/2'), { username: '', password: 'p@ss', tls: {} });
  assert.deepEqual(redisOptions('rediss://alice:pw@h'), { tls: {} }); // ioredis reads user and password from the URL
  const o = redisOptions('rediss://h', { ca: certs.ca, cert: certs.client.cert, key: certs.client.key });
  assert.deepEqual(Object.keys(o.tls).sort(), ['ca', 'cert', 'key']);
  assert.match(o.tls.ca.toString(), /BEGIN CERTIFICATE/);
  assert.throws(() => redisOptions('redis://h', { ca: certs.ca }), /--redis-tls-ca is set but the Redis URL is not rediss:\/\//);
  assert.throws(() => redisOptions('rediss://h', { cert: certs.client.cert }), /needs its key/);
});

test('a server certificate signed by another CA is refused, with the reason', async () => {
  const other = await startRedis({ tls: { ...certs.stranger, ca: certs.ca } });
  servers.push(other);
  const tc = await startThreadcast({ redisUrl: other.url, env: tlsEnv() });
  const why = 'TLS handshake failed: certificate verify failed: unable to get local issuer certificate';
  const line = await refused(tc, (l) => l.msg === 'redis connect failed' && l.error === why, 'the refusal');
  assert.equal(line.level, 'error');
  const p = await produceClean(other.url, 'tls-x', [event(1)], { args: tlsArgs(), allowFail: true });
  assert.equal(p.code, 1);
  assert.ok(p.stderr.includes(why), p.stderr);
  await stopClean(tc);
  await other.cleanup();
});

test('a certificate for another host is refused, by name and by address', async () => {
  const other = await startRedis({ tls: { ...certs.wrongHost, ca: certs.ca } });
  servers.push(other);
  const byName = await startThreadcast({ redisUrl: `rediss://localhost:${other.port}`, env: tlsEnv() });
  await refused(byName, (l) => l.msg === 'redis connect failed' &&
    l.error === 'TLS handshake failed: certificate verify failed: hostname mismatch', 'the name refused');
  const p = await produceClean(other.url, 'tls-x', [event(1)], { args: tlsArgs(), allowFail: true });
  assert.equal(p.code, 1);
  assert.ok(p.stderr.includes('TLS handshake failed: certificate verify failed: IP address mismatch'), p.stderr);
  await stopClean(byName);
  await other.cleanup();
});

test('Redis that wants a client certificate refuses a gateway without one', async () => {
  const tc = await startThreadcast({ redisUrl: aliceUrl(), env: tlsEnv({ noCert: true }) });
  // TLS 1.3: the server says so after the client's side of the handshake, or
  // its close races our first bytes and the connection is reset.
  await refused(tc, (l) => l.msg === 'redis connect failed' &&
    /^TLS (error|handshake failed): (tlsv13 alert certificate required|Connection reset by peer)$/.test(l.error),
  'the refusal');
  assert.ok(tc.logs.some((l) => /tlsv13 alert certificate required/.test(l.error ?? '')), tc.stderr);
  await stopClean(tc);
});

test('a wrong password is refused with Redis\' own words', async () => {
  const tc = await startThreadcast({ redisUrl: `rediss://alice:wrong@127.0.0.1:${redis.port}`, env: tlsEnv() });
  await refused(tc, (l) => l.msg === 'redis refused the connection setup' && l.step === 'AUTH' &&
    /^WRONGPASS invalid username-password pair/.test(l.error), 'the refusal');
  const p = await produceClean(`rediss://alice:wrong@127.0.0.1:${redis.port}`, 'tls-x', [event(1)], { args: tlsArgs(), allowFail: true });
  assert.equal(p.code, 1);
  assert.match(p.stderr, /AUTH: WRONGPASS/);
  await stopClean(tc);
});

test('tls-auth-clients optional, requirepass: no client certificate, the password-only URL forms', async () => {
  const other = await startRedis({ tls: { ...certs.server, ca: certs.ca, authClients: 'optional' }, extra: ['--requirepass', 'pw2'] });
  servers.push(other);
  const tc = await startThreadcast({ redisUrl: `rediss://pw2@127.0.0.1:${other.port}`, env: tlsEnv({ noCert: true }) });
  await tc.ready();
  const c = await connect(tc.url('tls-b'));
  assert.equal((await c.request({ id: 1, method: 'subscription.subscribe', params: { channels: ALL } })).type, 'success');
  await produceClean(`rediss://:pw2@127.0.0.1:${other.port}`, 'tls-b', [event(7)], { args: ['--redis-tls-ca', certs.ca] });
  await waitUntil(() => c.events.length === 1, 10000, 'the event');
  await c.close();
  await stopClean(tc);
  await other.cleanup();
});

/** A Sentinel on a TLS port with a password of its own, watching the TLS master as alice. */
async function startTlsSentinel(masterPort, dir) {
  const port = await freePort();
  const conf = path.join(dir, `sentinel-${port}.conf`);
  writeFileSync(conf, [
    'port 0', `tls-port ${port}`, 'bind 127.0.0.1', `dir ${dir}`,
    `tls-cert-file ${certs.server.cert}`, `tls-key-file ${certs.server.key}`, `tls-ca-cert-file ${certs.ca}`,
    `tls-client-cert-file ${certs.client.cert}`, `tls-client-key-file ${certs.client.key}`,
    'tls-replication yes', 'tls-auth-clients no', 'requirepass sentpw',
    `sentinel monitor tcmaster 127.0.0.1 ${masterPort} 1`,
    'sentinel auth-user tcmaster alice', 'sentinel auth-pass tcmaster s3cret',
  ].join('\n') + '\n');
  const proc = track(spawn('redis-server', [conf, '--sentinel'], { stdio: ['ignore', 'pipe', 'pipe'] }));
  let out = '';
  proc.stdout.on('data', (d) => { out += d; });
  proc.stderr.on('data', (d) => { out += d; });
  await waitUntil(() => out.includes('+monitor master tcmaster'), 10000, `sentinel to monitor: ${out}`);
  return { port, proc };
}

test('Sentinels are asked over TLS with their own password; a wrong one is named', async () => {
  const sentinel = await startTlsSentinel(redis.port, redis.dir);
  try {
    const args = (pw) => ['--redis-sentinels', `${pw}@127.0.0.1:${sentinel.port}`, '--redis-sentinel-master', 'tcmaster',
      '--redis-backoff-max', '500'];
    const tc = await startThreadcast({ redisUrl: 'rediss://alice:s3cret@127.0.0.1:1', args: args('sentpw'), env: tlsEnv() });
    await tc.ready();
    assert.ok(tc.logs.some((l) => l.msg === 'redis master named by sentinel' && l.node === `127.0.0.1:${redis.port}`), tc.stderr);
    await stopClean(tc);
    assert.deepEqual(tc.sanitizerReports(), [], tc.stderr);

    const bad = await startThreadcast({ redisUrl: 'rediss://alice:s3cret@127.0.0.1:1', args: args('nope'), env: tlsEnv() });
    await refused(bad, (l) => l.msg === 'sentinel refused AUTH' && /^WRONGPASS/.test(l.error), 'the refusal');
    await stopClean(bad);
  } finally {
    sentinel.proc.kill('SIGKILL');
    await sleep(50);
  }
});
