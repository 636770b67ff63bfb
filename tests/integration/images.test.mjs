// The images, built for real and run from their filesystems. scripts/images
// builds deploy/Dockerfile with podman (base images made here with
// debootstrap, no registry); the gateway image's filesystem is exported and
// the gateway started from it as a container would start it — its
// ENTRYPOINT, its environment, its user — under `chroot --userspec`, against
// a redis-server on loopback (containers themselves cannot start here).
// Needs root, as scripts/images does. scripts/test runs this file alone,
// after the others: a cold build takes minutes.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, readFileSync, existsSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { repoRoot, startRedis, stopAll, waitUntil, freePort, connect } from './lib/harness.mjs';

const BUILD_LIMIT_MS = 15 * 60 * 1000;
const images = path.join(repoRoot, 'scripts', 'images');
const TAG = 'threadcast:latest';

/** Runs scripts/images with args, killed (its process group) after limitMs. */
function runImages(args, limitMs) {
  return new Promise((resolve) => {
    const p = spawn(images, args, { detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.on('data', (d) => { out += d; });
    p.stderr.on('data', (d) => { out += d; });
    let timedOut = false;
    const timer = setTimeout(() => { timedOut = true; try { process.kill(-p.pid, 'SIGKILL'); } catch { /* gone */ } }, limitMs);
    p.on('close', (code) => { clearTimeout(timer); resolve({ code, out, timedOut }); });
  });
}

let build; // { code, out, timedOut, ms }
let rootfs;
let image; // podman image inspect of TAG
let redis;
let gw; // { proc, port, stderr, logs, exit }
const dirs = [];

/** The image's environment as a container gets it, with overrides. */
function imageEnv(overrides) {
  const env = {};
  for (const kv of image.Config.Env || []) {
    const i = kv.indexOf('=');
    env[kv.slice(0, i)] = kv.slice(i + 1);
  }
  return { ...env, ...overrides };
}

/** The image's USER as uid, gid and home, read from its own /etc/passwd. */
function imageUser() {
  const user = image.Config.User || 'root';
  const [name, group] = user.split(':');
  const entry = readFileSync(path.join(rootfs, 'etc/passwd'), 'utf8').split('\n').map((l) => l.split(':'))
    .find((f) => f[0] === name || f[2] === name);
  assert.ok(entry, `the image's user ${name} is in its /etc/passwd`);
  return { uid: Number(entry[2]), gid: group !== undefined ? Number(group) : Number(entry[3]), home: entry[5] };
}

/** Runs argv inside the image's filesystem as its user (chroot --userspec). */
function chrootArgs(argv) {
  const u = imageUser();
  return [`--userspec=${u.uid}:${u.gid}`, rootfs, ...argv];
}

/** The HEALTHCHECK's command as an argv. */
function healthcheckArgv() {
  const [kind, ...rest] = image.Healthcheck.Test;
  if (kind === 'CMD') return rest;
  assert.equal(kind, 'CMD-SHELL');
  return ['/bin/sh', '-c', rest[0]];
}

before(async () => {
  const t0 = Date.now();
  build = await runImages(['gateway'], BUILD_LIMIT_MS);
  build.ms = Date.now() - t0;
  assert.ok(!build.timedOut, `scripts/images gateway did not finish within ${BUILD_LIMIT_MS / 60000} minutes:\n${build.out.slice(-4000)}`);
  assert.equal(build.code, 0, `scripts/images gateway failed:\n${build.out.slice(-4000)}`);
  const inspect = spawnSync(images, ['podman', 'image', 'inspect', TAG], { encoding: 'utf8' });
  assert.equal(inspect.status, 0, inspect.stderr);
  [image] = JSON.parse(inspect.stdout);
  rootfs = mkdtempSync(path.join(tmpdir(), 'tc-image-'));
  dirs.push(rootfs);
  chmodSync(rootfs, 0o755); // the image's user must be able to walk its own /
  const exp = await runImages(['export', TAG, rootfs], 5 * 60 * 1000);
  assert.equal(exp.code, 0, `scripts/images export failed:\n${exp.out}`);
  redis = await startRedis();
  dirs.push(redis.dir);
}, { timeout: BUILD_LIMIT_MS + 10 * 60 * 1000 });

after(async () => {
  if (gw && gw.exit === null) {
    try { process.kill(gw.proc.pid, 'SIGKILL'); } catch { /* gone */ }
  }
  await stopAll();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

test('scripts/images builds the gateway image from the local bases: slim, non-root, with its HEALTHCHECK', (t) => {
  for (const line of build.out.split('\n').filter((l) => /^(image|base|all done) /.test(l))) t.diagnostic(line);
  t.diagnostic(`scripts/images gateway took ${(build.ms / 1000).toFixed(1)} s`);
  assert.match(build.out, /^image gateway threadcast:latest: \d+ MB, built in \d+ s$/m);
  // FROM debian:bookworm-slim resolved to the base made here: its layers are the image's first.
  const slim = JSON.parse(spawnSync(images, ['podman', 'image', 'inspect', 'debian:bookworm-slim'], { encoding: 'utf8' }).stdout)[0];
  assert.deepEqual(image.RootFS.Layers.slice(0, slim.RootFS.Layers.length), slim.RootFS.Layers);
  assert.ok(image.Size < 150e6, `the runtime image stays small: ${image.Size} bytes`);
  assert.deepEqual(image.Config.Entrypoint, ['/usr/local/bin/threadcast']);
  assert.equal(image.Config.StopSignal, 'SIGTERM');
  assert.ok(image.Healthcheck?.Test, 'HEALTHCHECK kept (docker format)');
  const u = imageUser();
  assert.notEqual(u.uid, 0, 'runs as a non-root user');
  for (const bin of ['threadcast', 'threadcast-agent', 'threadcast-produce'])
    assert.ok(existsSync(path.join(rootfs, 'usr/local/bin', bin)), bin);
  assert.ok(existsSync(path.join(rootfs, 'usr/local/share/threadcast/www/index.html')), 'the demo page');
  // Nothing of the build stage: no compiler, no headers.
  for (const p of ['usr/bin/gcc', 'usr/bin/meson', 'usr/include/uv.h', 'src']) assert.ok(!existsSync(path.join(rootfs, p)), p);
  // Every library the binary links is in the image: it runs there.
  const v = spawnSync('chroot', chrootArgs(['/usr/local/bin/threadcast', '--version']), { encoding: 'utf8', env: imageEnv({}) });
  assert.equal(v.status, 0, v.stderr);
  assert.match(v.stdout, /^threadcast \d+\.\d+\.\d+/);
});

test("the gateway runs from the image's filesystem as the image's user: /readyz, a WebSocket stream, an appended event", async () => {
  const port = await freePort();
  const u = imageUser();
  // What a container of this image gets: its env (ports and Redis pointed here), its user, its ENTRYPOINT.
  const env = imageEnv({ HOME: u.home, THREADCAST_PORT: String(port), THREADCAST_HOST: '127.0.0.1',
    THREADCAST_REDIS_URL: redis.url, THREADCAST_AUTH: 'off' });
  const argv = [...image.Config.Entrypoint, ...(image.Config.Cmd || [])];
  const proc = spawn('chroot', chrootArgs(argv), { env, stdio: ['ignore', 'ignore', 'pipe'] });
  gw = { proc, port, stderr: '', logs: [], exit: null };
  proc.on('exit', (code, signal) => { gw.exit = { code, signal }; });
  proc.stderr.on('data', (d) => {
    gw.stderr += d;
    for (const line of String(d).split('\n')) { try { gw.logs.push(JSON.parse(line)); } catch { /* partial */ } }
  });
  const listening = await waitUntil(() => gw.logs.find((l) => l.msg === 'listening') || gw.exit, 15000, 'the gateway to listen');
  assert.equal(listening.port, port, `threadcast exited early: ${gw.stderr}`);
  // chroot execs the entrypoint: this pid is threadcast's, running as the image's user.
  const status = readFileSync(`/proc/${proc.pid}/status`, 'utf8');
  assert.match(status, new RegExp(`^Uid:\\s+${u.uid}\\s`, 'm'));
  assert.match(readFileSync(`/proc/${proc.pid}/cmdline`, 'utf8'), /^\/usr\/local\/bin\/threadcast\0/);

  const http = (p) => fetch(`http://127.0.0.1:${port}${p}`);
  await waitUntil(async () => { try { return (await http('/readyz')).status === 200; } catch { return false; } },
    15000, '/readyz 200');

  const client = await connect(`ws://127.0.0.1:${port}/threads/t1/stream/events`);
  const sub = await client.request({ id: 1, method: 'subscription.subscribe', params: { channels: ['lifecycle'] } });
  assert.equal(sub.type, 'success', JSON.stringify(sub));
  // The producer contract, through the function the gateway loaded at start.
  const event = { method: 'lifecycle', params: { namespace: [], data: { event: 'started', graph_name: 'from-the-image' } } };
  const fcall = spawnSync('redis-cli', ['-p', String(redis.port), 'FCALL', 'threadcast_append', '1', 't1', JSON.stringify(event)],
    { encoding: 'utf8' });
  assert.equal(fcall.status, 0, fcall.stderr);
  assert.match(fcall.stdout.trim(), /^\(integer\) 1$|^1$/, fcall.stdout);
  await waitUntil(() => client.events.length >= 1, 5000, 'the event');
  assert.equal(client.events[0].params.data.graph_name, 'from-the-image');
  assert.equal(client.events[0].seq, 1);
  assert.ok(client.events[0].event_id, JSON.stringify(client.events[0]));
  await client.close();
});

test("the image's HEALTHCHECK passes inside it against the gateway, and fails once SIGTERM stopped it", async () => {
  assert.ok(gw && gw.exit === null, 'the gateway of the previous test is running');
  const argv = healthcheckArgv();
  const env = imageEnv({ THREADCAST_PORT: String(gw.port) });
  const timeout = image.Healthcheck.Timeout / 1e6 || 3000;
  const ok = spawnSync('chroot', chrootArgs(argv), { env, encoding: 'utf8', timeout });
  assert.equal(ok.status, 0, `HEALTHCHECK failed: ${ok.stderr}`);
  // The image's STOPSIGNAL: the gateway drains and exits 0.
  gw.proc.kill(image.Config.StopSignal || 'SIGTERM');
  await waitUntil(() => gw.exit, 15000, 'the gateway to exit');
  assert.deepEqual(gw.exit, { code: 0, signal: null }, gw.stderr);
  const down = spawnSync('chroot', chrootArgs(argv), { env, encoding: 'utf8', timeout });
  assert.notEqual(down.status, 0, 'HEALTHCHECK fails with no gateway');
});
