// The images, built for real and run from their filesystems. scripts/images
// builds deploy/Dockerfile, deploy/Dockerfile.worker and
// deploy/Dockerfile.worker-python with podman (base images made here with
// debootstrap, no registry); each image's filesystem is exported and its
// program started from it as a container would start it — its ENTRYPOINT, its
// environment, its user — under `chroot --userspec`, against a redis-server on
// loopback (containers themselves cannot start here): the gateway alone, then
// a gateway and a LangGraph worker together, streaming a whole run of the
// example graph, then a gateway and Python workers, streaming a run of the
// example Python project. Needs root, as scripts/images
// does. scripts/test runs this file alone, after the others: a cold build
// takes minutes.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, readFileSync, existsSync, chmodSync, readdirSync, readlinkSync, mkdirSync, copyFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import YAML from 'yaml';
import { repoRoot, startRedis, stopAll, waitUntil, freePort, connect, collectLogs } from './lib/harness.mjs';

const BUILD_LIMIT_MS = 15 * 60 * 1000;
const images = path.join(repoRoot, 'scripts', 'images');

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
/** The images by name: { tag, image (podman image inspect), rootfs }. */
const img = {
  gateway: { tag: 'threadcast:latest' },
  worker: { tag: 'threadcast-worker:latest' },
  python: { tag: 'threadcast-worker-python:latest' },
};
let redis;
let gw; // the gateway of the second test: { proc, port, stderr, logs, exit }
const procs = []; // everything started from an image: stopped by PID in after()
const dirs = [];

/** An image's environment as a container gets it, with overrides. */
function imageEnv(im, overrides) {
  const env = {};
  for (const kv of im.image.Config.Env || []) {
    const i = kv.indexOf('=');
    env[kv.slice(0, i)] = kv.slice(i + 1);
  }
  return { ...env, ...overrides };
}

/** An image's USER as uid, gid and home, read from its own /etc/passwd. */
function imageUser(im) {
  const user = im.image.Config.User || 'root';
  const [name, group] = user.split(':');
  const entry = readFileSync(path.join(im.rootfs, 'etc/passwd'), 'utf8').split('\n').map((l) => l.split(':'))
    .find((f) => f[0] === name || f[2] === name);
  assert.ok(entry, `the image's user ${name} is in its /etc/passwd`);
  return { uid: Number(entry[2]), gid: group !== undefined ? Number(group) : Number(entry[3]), home: entry[5] };
}

/** Runs argv inside an image's filesystem as its user (chroot --userspec). */
function chrootArgs(im, argv) {
  const u = imageUser(im);
  return [`--userspec=${u.uid}:${u.gid}`, im.rootfs, ...argv];
}

/** The HEALTHCHECK's command as an argv. */
function healthcheckArgv(im) {
  const [kind, ...rest] = im.image.Healthcheck.Test;
  if (kind === 'CMD') return rest;
  assert.equal(kind, 'CMD-SHELL');
  return ['/bin/sh', '-c', rest[0]];
}

/**
 * Starts an image's ENTRYPOINT (with cmd in place of its CMD, as `docker run
 * IMAGE cmd...` does) from its filesystem, as its user, with its environment
 * plus env; stderr kept, its JSON lines parsed into logs. chroot execs the
 * entrypoint, so proc.pid is the program's own.
 */
function startFromImage(im, { cmd, env = {} } = {}) {
  const u = imageUser(im);
  const argv = [...im.image.Config.Entrypoint, ...(cmd ?? im.image.Config.Cmd ?? [])];
  const proc = spawn('chroot', chrootArgs(im, argv), { env: imageEnv(im, { HOME: u.home, ...env }),
    stdio: ['ignore', 'ignore', 'pipe'] });
  const p = { proc, stderr: '', logs: [], exit: null };
  procs.push(p);
  proc.on('exit', (code, signal) => { p.exit = { code, signal }; });
  collectLogs(proc.stderr, p);
  p.stop = async (signal = 'SIGTERM') => {
    if (p.exit === null) proc.kill(signal);
    await waitUntil(() => p.exit, 15000, `${im.tag} to exit`);
    return p.exit;
  };
  return p;
}

/** The gateway image on a free loopback port against redisUrl, resolved once it listens. */
async function startGateway(redisUrl) {
  const port = await freePort();
  // What a container of this image gets: its env (ports and Redis pointed here), its user, its ENTRYPOINT.
  const g = startFromImage(img.gateway, { env: { THREADCAST_PORT: String(port), THREADCAST_HOST: '127.0.0.1',
    THREADCAST_REDIS_URL: redisUrl, THREADCAST_AUTH: 'off' } });
  g.port = port;
  const listening = await waitUntil(() => g.logs.find((l) => l.msg === 'listening') || g.exit, 15000, 'the gateway to listen');
  assert.equal(listening.port, port, `threadcast exited early: ${g.stderr}`);
  await waitUntil(async () => {
    try { return (await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200; } catch { return false; }
  }, 15000, '/readyz 200');
  return g;
}

/** Asserts that pid runs as uid and that its command line begins with argv0. */
function assertRunsAs(pid, uid, argv0) {
  assert.match(readFileSync(`/proc/${pid}/status`, 'utf8'), new RegExp(`^Uid:\\s+${uid}\\s`, 'm'));
  assert.ok(readFileSync(`/proc/${pid}/cmdline`, 'utf8').startsWith(`${argv0}\0`), `pid ${pid} runs ${argv0}`);
}

/**
 * Starts a run of the example graph (JavaScript's, or its Python twin: the
 * same topology and texts) as assistant `assistant` through the gateway g, on
 * thread `thread`, and checks its stream: `run.start` answered, the root
 * lifecycle from `started` to `completed`, the messages token by token (the
 * question, then what the fake model says), in seq order.
 */
async function streamExampleRun(g, thread, assistant, worker) {
  const c = await connect(`ws://127.0.0.1:${g.port}/threads/${thread}/stream/events`);
  try {
    const sub = await c.request({ id: 1, method: 'subscription.subscribe', params: { channels: ['lifecycle', 'messages'] } });
    assert.equal(sub.type, 'success', JSON.stringify(sub));
    const q = 'tell me about otters';
    const started = await c.request({ id: 2, method: 'run.start',
      params: { assistant_id: assistant, input: { messages: [{ role: 'user', content: q }] } } });
    assert.equal(started.type, 'success', JSON.stringify(started));
    const isRoot = (e) => e.method === 'lifecycle' && e.params.namespace.length === 0;
    const end = await waitUntil(() => c.events.find((e) => isRoot(e) && ['completed', 'failed', 'interrupted']
      .includes(e.params.data.event)), 60000, 'the run to end');
    assert.deepEqual(end.params.data, { event: 'completed', graph_name: assistant }, worker.stderr);
    const root = c.events.filter(isRoot).map((e) => e.params.data.event);
    assert.deepEqual([root[0], root.at(-1), root.filter((e) => e === 'started').length], ['started', 'completed', 1], root.join());
    // The messages, token by token (one open message a namespace): the
    // question, then what the example graph's fake model says.
    const messages = c.events.filter((e) => e.method === 'messages');
    assert.ok(messages.length > 10, `messages streamed: ${messages.length}`);
    const texts = new Map(); // message id → text
    const open = new Map(); // namespace → the id of its open message
    for (const { params: { namespace, data } } of messages) {
      const ns = namespace.join('|');
      if (data.event === 'message-start') { open.set(ns, data.id); texts.set(data.id, ''); }
      if (data.event === 'content-block-delta' && data.delta.type === 'text-delta')
        texts.set(open.get(ns), texts.get(open.get(ns)) + data.delta.text);
    }
    assert.deepEqual([...texts.values()], [q, 'Let me search for that. ', `Here is what I found about "${q}".`,
      'Summary: the search found three sources.']);
    const seqs = c.events.map((e) => e.seq);
    assert.deepEqual(seqs, [...seqs].sort((a, b) => a - b), 'in seq order');
  } finally {
    await c.close();
  }
}

/** The layers of debian:bookworm-slim, the base made here. */
function slimLayers() {
  return JSON.parse(spawnSync(images, ['podman', 'image', 'inspect', 'debian:bookworm-slim'], { encoding: 'utf8' }).stdout)[0]
    .RootFS.Layers;
}

before(async () => {
  const t0 = Date.now();
  build = await runImages(['gateway', 'worker', 'worker-python'], BUILD_LIMIT_MS);
  build.ms = Date.now() - t0;
  assert.ok(!build.timedOut, `scripts/images did not finish within ${BUILD_LIMIT_MS / 60000} minutes:\n${build.out.slice(-4000)}`);
  assert.equal(build.code, 0, `scripts/images gateway worker worker-python failed:\n${build.out.slice(-4000)}`);
  for (const im of Object.values(img)) {
    const inspect = spawnSync(images, ['podman', 'image', 'inspect', im.tag], { encoding: 'utf8' });
    assert.equal(inspect.status, 0, inspect.stderr);
    [im.image] = JSON.parse(inspect.stdout);
    im.rootfs = mkdtempSync(path.join(tmpdir(), 'tc-image-'));
    dirs.push(im.rootfs);
    chmodSync(im.rootfs, 0o755); // the image's user must be able to walk its own /
    const exp = await runImages(['export', im.tag, im.rootfs], 5 * 60 * 1000);
    assert.equal(exp.code, 0, `scripts/images export ${im.tag} failed:\n${exp.out}`);
  }
  redis = await startRedis();
  dirs.push(redis.dir);
}, { timeout: BUILD_LIMIT_MS + 10 * 60 * 1000 });

after(async () => {
  for (const p of procs) {
    if (p.exit === null) {
      try { process.kill(p.proc.pid, 'SIGKILL'); } catch { /* gone */ }
      await waitUntil(() => p.exit, 5000, 'a killed process to exit').catch(() => {});
    }
  }
  await stopAll();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

test('scripts/images builds the gateway image from the local bases: slim, non-root, with its HEALTHCHECK', (t) => {
  for (const line of build.out.split('\n').filter((l) => /^(image|base|all done) /.test(l))) t.diagnostic(line);
  t.diagnostic(`scripts/images gateway worker worker-python took ${(build.ms / 1000).toFixed(1)} s`);
  assert.match(build.out, /^image gateway threadcast:latest: \d+ MB, built in \d+ s$/m);
  const { image, rootfs } = img.gateway;
  // FROM debian:bookworm-slim resolved to the base made here: its layers are the image's first.
  const slim = slimLayers();
  assert.deepEqual(image.RootFS.Layers.slice(0, slim.length), slim);
  assert.ok(image.Size < 150e6, `the runtime image stays small: ${image.Size} bytes`);
  assert.deepEqual(image.Config.Entrypoint, ['/usr/local/bin/threadcast']);
  assert.equal(image.Config.StopSignal, 'SIGTERM');
  assert.ok(image.Healthcheck?.Test, 'HEALTHCHECK kept (docker format)');
  const u = imageUser(img.gateway);
  assert.notEqual(u.uid, 0, 'runs as a non-root user');
  for (const bin of ['threadcast', 'threadcast-agent', 'threadcast-produce'])
    assert.ok(existsSync(path.join(rootfs, 'usr/local/bin', bin)), bin);
  assert.ok(existsSync(path.join(rootfs, 'usr/local/share/threadcast/www/index.html')), 'the demo page');
  // Nothing of the build stage: no compiler, no headers.
  for (const p of ['usr/bin/gcc', 'usr/bin/meson', 'usr/include/uv.h', 'src']) assert.ok(!existsSync(path.join(rootfs, p)), p);
  // Every library the binary links is in the image: it runs there.
  const v = spawnSync('chroot', chrootArgs(img.gateway, ['/usr/local/bin/threadcast', '--version']),
    { encoding: 'utf8', env: imageEnv(img.gateway, {}) });
  assert.equal(v.status, 0, v.stderr);
  assert.match(v.stdout, /^threadcast \d+\.\d+\.\d+/);
});

test("the gateway runs from the image's filesystem as the image's user: /readyz, a WebSocket stream, an appended event", async () => {
  gw = await startGateway(redis.url);
  // chroot execs the entrypoint: this pid is threadcast's, running as the image's user.
  assertRunsAs(gw.proc.pid, imageUser(img.gateway).uid, '/usr/local/bin/threadcast');

  const client = await connect(`ws://127.0.0.1:${gw.port}/threads/t1/stream/events`);
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
  const { image } = img.gateway;
  const argv = healthcheckArgv(img.gateway);
  const env = imageEnv(img.gateway, { THREADCAST_PORT: String(gw.port) });
  const timeout = image.Healthcheck.Timeout / 1e6 || 3000;
  const ok = spawnSync('chroot', chrootArgs(img.gateway, argv), { env, encoding: 'utf8', timeout });
  assert.equal(ok.status, 0, `HEALTHCHECK failed: ${ok.stderr}`);
  // The image's STOPSIGNAL: the gateway drains and exits 0.
  assert.deepEqual(await gw.stop(image.Config.StopSignal || 'SIGTERM'), { code: 0, signal: null }, gw.stderr);
  const down = spawnSync('chroot', chrootArgs(img.gateway, argv), { env, encoding: 'utf8', timeout });
  assert.notEqual(down.status, 0, 'HEALTHCHECK fails with no gateway');
});

test('scripts/images builds the worker image: Node.js 20, production dependencies only, the function library, non-root', () => {
  assert.match(build.out, /^image worker threadcast-worker:latest: \d+ MB, built in \d+ s$/m);
  const { image, rootfs } = img.worker;
  const slim = slimLayers();
  assert.deepEqual(image.RootFS.Layers.slice(0, slim.length), slim, 'built on the local bookworm-slim');
  assert.ok(image.Size < 400e6, `the worker image: ${image.Size} bytes`);
  assert.deepEqual(image.Config.Entrypoint, ['node', '/opt/threadcast-worker/bin/threadcast-worker.js']);
  assert.equal(image.Config.StopSignal, 'SIGTERM');
  const u = imageUser(img.worker);
  assert.equal(u.uid, 10002, 'runs as threadcast-worker (uid 10002)');
  const app = path.join(rootfs, 'opt/threadcast-worker');
  // worker.js loads the library from beside itself when Redis has none: the image's copy is the repository's.
  assert.equal(readFileSync(path.join(app, 'threadcast.lua'), 'utf8'),
    readFileSync(path.join(repoRoot, 'protocol/redis/threadcast.lua'), 'utf8'));
  // The lock file's runtime dependencies, none of its devDependencies, and no npm or build tools.
  const pkg = JSON.parse(readFileSync(path.join(repoRoot, 'src/worker/package.json'), 'utf8'));
  for (const dep of Object.keys(pkg.dependencies)) assert.ok(existsSync(path.join(app, 'node_modules', dep, 'package.json')), dep);
  for (const dep of Object.keys(pkg.devDependencies)) assert.ok(!existsSync(path.join(app, 'node_modules', dep)), `no ${dep}`);
  for (const p of ['usr/bin/npm', 'usr/bin/nodejs', 'usr/share/nodejs', 'usr/bin/gcc', 'opt/node'])
    assert.ok(!existsSync(path.join(rootfs, p)), `no ${p}`);
  const env = imageEnv(img.worker, { HOME: u.home });
  const v = spawnSync('chroot', chrootArgs(img.worker, ['node', '--version']), { encoding: 'utf8', env });
  assert.equal(v.status, 0, v.stderr);
  assert.match(v.stdout, /^v20\./);
  const help = spawnSync('chroot', chrootArgs(img.worker, [...image.Config.Entrypoint, '--help']), { encoding: 'utf8', env });
  assert.equal(help.status, 0, help.stderr);
  assert.match(help.stdout, /^usage: threadcast-worker /);
});

test('a gateway and a LangGraph worker from their images stream a whole run of the example graph', async () => {
  // A Redis of their own with no function library: the worker, started first, loads the image's copy.
  const r = await startRedis();
  dirs.push(r.dir);
  const u = imageUser(img.worker);
  const worker = startFromImage(img.worker, { cmd: ['--redis-url', r.url, '--name', 'from-the-image'],
    env: { THREADCAST_FAKE_TOKEN_MS: '5' } });
  const ready = await waitUntil(() => worker.logs.find((l) => l.msg === 'worker ready') || worker.exit, 30000,
    'the worker to be ready');
  assert.equal(ready.msg, 'worker ready', `the worker exited: ${worker.stderr}`);
  assert.equal(ready.name, 'from-the-image');
  assert.deepEqual(ready.assistants, ['agent']);
  assertRunsAs(worker.proc.pid, u.uid, 'node');
  const lib = spawnSync('redis-cli', ['-p', String(r.port), 'FUNCTION', 'LIST', 'LIBRARYNAME', 'threadcast'], { encoding: 'utf8' });
  assert.match(lib.stdout, /threadcast_append/, 'the worker loaded the function library');

  const g = await startGateway(r.url);
  await streamExampleRun(g, 'img-run', 'agent', worker);
  assert.deepEqual(await worker.stop('SIGTERM'), { code: 0, signal: null }, worker.stderr);
  assert.doesNotMatch(worker.stderr, /"level":"error"/, worker.stderr);
  assert.deepEqual(await g.stop('SIGTERM'), { code: 0, signal: null }, g.stderr);
  await r.cleanup();
});

const pyPkgName = (n) => n.toLowerCase().replace(/[-_.]+/g, '-'); // PEP 503's normal form
const pyVenv = 'opt/threadcast-worker-python/venv';

/** The distributions installed in the Python image's venv: normalised name → version. */
function venvDistributions(rootfs) {
  const lib = path.join(rootfs, pyVenv, 'lib');
  const [pyDir] = readdirSync(lib).filter((d) => /^python3\.\d+$/.test(d));
  const site = path.join(lib, pyDir, 'site-packages');
  const dists = new Map();
  for (const d of readdirSync(site).filter((e) => e.endsWith('.dist-info'))) {
    const meta = readFileSync(path.join(site, d, 'METADATA'), 'utf8');
    dists.set(pyPkgName(/^Name: (.+)$/m.exec(meta)[1].trim()), /^Version: (.+)$/m.exec(meta)[1].trim());
  }
  return { site, dists };
}

/** Every file under dir, relative, but Python's and langgraph dev's leftovers (.dockerignore's). */
function projectFiles(dir, rel = '') {
  return readdirSync(path.join(dir, rel), { withFileTypes: true }).flatMap((e) => {
    if (['__pycache__', '.langgraph_api'].includes(e.name) || e.name.endsWith('.pyc')) return [];
    const r = path.join(rel, e.name);
    return e.isDirectory() ? projectFiles(dir, r) : [r];
  }).sort();
}

/**
 * The compose file's Python worker: its command, and its project file put
 * where compose mounts it, inside the image's filesystem.
 */
function composePythonWorker() {
  const svc = YAML.parse(readFileSync(path.join(repoRoot, 'deploy/docker-compose.yml'), 'utf8')).services['worker-python-1'];
  assert.equal(svc.image, img.python.tag);
  for (const v of svc.volumes) {
    const [src, target] = v.split(':');
    mkdirSync(path.dirname(path.join(img.python.rootfs, target)), { recursive: true });
    copyFileSync(path.join(repoRoot, 'deploy', src), path.join(img.python.rootfs, target));
  }
  return svc.command;
}

test("scripts/images builds the Python worker image: Debian's Python 3.11, the lock's packages, the function library, the example project, non-root", () => {
  assert.match(build.out, /^image worker-python threadcast-worker-python:latest: \d+ MB, built in \d+ s$/m);
  const { image, rootfs } = img.python;
  const slim = slimLayers();
  assert.deepEqual(image.RootFS.Layers.slice(0, slim.length), slim, 'built on the local bookworm-slim');
  assert.ok(image.Size < 400e6, `the Python worker image: ${image.Size} bytes`);
  assert.deepEqual(image.Config.Entrypoint, [`/${pyVenv}/bin/threadcast-worker-python`]);
  assert.deepEqual(image.Config.Cmd, ['--config', '/project/langgraph.json', '--redis-url', 'redis://redis:6379']);
  assert.equal(image.Config.StopSignal, 'SIGTERM');
  const u = imageUser(img.python);
  assert.equal(u.uid, 10003, 'runs as threadcast-worker-python (uid 10003)');
  // The venv runs Debian's interpreter, 3.11.
  assert.equal(readlinkSync(path.join(rootfs, pyVenv, 'bin/python3')), '/usr/bin/python3');
  const env = imageEnv(img.python, { HOME: u.home });
  const v = spawnSync('chroot', chrootArgs(img.python, ['python3', '--version']), { encoding: 'utf8', env });
  assert.equal(v.status, 0, v.stderr);
  assert.match(v.stdout, /^Python 3\.11\.\d+$/m);
  // Exactly the lock's distributions at the lock's versions, the package, and pip (for images FROM
  // this one); setuptools only built the package.
  const pins = new Map([...readFileSync(path.join(repoRoot, 'src/worker-python/requirements.lock'), 'utf8')
    .matchAll(/^([A-Za-z0-9][\w.-]*)==(\S+)/gm)].map((m) => [pyPkgName(m[1]), m[2]]));
  assert.ok(pins.size > 20, `the lock pins ${pins.size} packages`);
  const { site, dists } = venvDistributions(rootfs);
  const version = /^version = "(.+)"$/m.exec(readFileSync(path.join(repoRoot, 'src/worker-python/pyproject.toml'), 'utf8'))[1];
  assert.equal(dists.get('threadcast-worker'), version);
  assert.ok(dists.has('pip'), 'pip kept');
  const others = new Map([...dists].filter(([n]) => !['threadcast-worker', 'pip'].includes(n)));
  assert.deepEqual(new Map([...others].sort()), new Map([...pins].sort()));
  // The package is the repository's, and loops.py finds the function library beside it.
  const pkg = path.join(site, 'threadcast_worker');
  const sources = readdirSync(path.join(repoRoot, 'src/worker-python/threadcast_worker')).filter((f) => f.endsWith('.py'));
  for (const f of sources)
    assert.equal(readFileSync(path.join(pkg, f), 'utf8'), readFileSync(path.join(repoRoot, 'src/worker-python/threadcast_worker', f), 'utf8'), f);
  assert.equal(readFileSync(path.join(pkg, 'threadcast.lua'), 'utf8'),
    readFileSync(path.join(repoRoot, 'protocol/redis/threadcast.lua'), 'utf8'));
  // The example project, as it is in the repository, is the default one.
  const example = path.join(repoRoot, 'src/worker-python/example');
  assert.deepEqual(projectFiles(path.join(rootfs, 'project')), projectFiles(example));
  for (const f of projectFiles(example))
    assert.equal(readFileSync(path.join(rootfs, 'project', f), 'utf8'), readFileSync(path.join(example, f), 'utf8'), f);
  // Nothing of the build stage: no compiler, no venv module, no sources, no pip cache, no CA secret.
  for (const p of ['usr/bin/gcc', 'usr/lib/python3.11/ensurepip', 'src', 'root/.cache/pip', 'run/secrets/ca-certificates',
    path.relative(rootfs, path.join(site, 'setuptools'))])
    assert.ok(!existsSync(path.join(rootfs, p)), `no ${p}`);
  const help = spawnSync('chroot', chrootArgs(img.python, [...image.Config.Entrypoint, '--help']), { encoding: 'utf8', env });
  assert.equal(help.status, 0, help.stderr);
  assert.match(help.stdout, /^usage: threadcast-worker-python /);
});

test("the Python image's projects load in it: the example's graph, and the compose file's rename of it", () => {
  const composeCmd = composePythonWorker();
  const configs = [img.python.image.Config.Cmd, composeCmd].map((c) => c[c.indexOf('--config') + 1]);
  // The worker's own loading (graphs.py), in the image's venv, as its user: each file's graphs imported and served.
  const script = `import json, sys
from threadcast_worker.graphs import apply_environment, load_project, serve_graphs
from threadcast_worker.logger import json_log
out = {}
for config in sys.argv[1:]:
    project = load_project(config)
    apply_environment(project)
    out[config] = sorted(serve_graphs(project, None, checkpointer=None, store=None, log=json_log))
print(json.dumps(out))`;
  const u = imageUser(img.python);
  const r = spawnSync('chroot', chrootArgs(img.python, ['python3', '-c', script, ...configs]),
    { encoding: 'utf8', env: imageEnv(img.python, { HOME: u.home }) });
  assert.equal(r.status, 0, r.stderr);
  assert.doesNotMatch(r.stderr, /"level":"error"/, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout), { '/project/langgraph.json': ['agent'], '/etc/threadcast/langgraph.json': ['agent-python'] });
});

test('a gateway and Python workers from their images stream runs of the example Python project', async () => {
  // A Redis of their own with no function library: the workers load the image's copy.
  const r = await startRedis();
  dirs.push(r.dir);
  const u = imageUser(img.python);
  const withRedis = (cmd, name) => {
    const c = [...cmd];
    c[c.indexOf('--redis-url') + 1] = r.url;
    return [...c, '--name', name];
  };
  const env = { THREADCAST_FAKE_TOKEN_MS: '5' };
  // The image alone (its CMD: the example project as it is), and as compose runs it.
  const workers = [
    { assistant: 'agent', p: startFromImage(img.python, { cmd: withRedis(img.python.image.Config.Cmd, 'py-image'), env }) },
    { assistant: 'agent-python', p: startFromImage(img.python, { cmd: withRedis(composePythonWorker(), 'py-compose'), env }) },
  ];
  // The console script's interpreter: the venv's python, run by the kernel from the script's #!.
  const shebang = readFileSync(path.join(img.python.rootfs, img.python.image.Config.Entrypoint[0]), 'utf8').split('\n')[0];
  assert.match(shebang, new RegExp(`^#!/${pyVenv}/bin/python`));
  for (const [i, { assistant, p }] of workers.entries()) {
    const name = i === 0 ? 'py-image' : 'py-compose';
    const ready = await waitUntil(() => p.logs.find((l) => l.msg === 'worker ready') || p.exit, 60000,
      `the Python worker ${name} to be ready`);
    assert.equal(ready.msg, 'worker ready', `the Python worker exited: ${p.stderr}`);
    assert.equal(ready.name, name);
    assert.deepEqual(ready.assistants, [assistant]);
    assertRunsAs(p.proc.pid, u.uid, shebang.slice(2).trim());
    const live = spawnSync('redis-cli', ['-p', String(r.port), 'ZRANGE', `{tc:commands}:w:${assistant}`, '0', '-1'], { encoding: 'utf8' });
    assert.deepEqual(live.stdout.trim().split('\n'), [name], `registered in {tc:commands}:w:${assistant}`);
  }
  const lib = spawnSync('redis-cli', ['-p', String(r.port), 'FUNCTION', 'LIST', 'LIBRARYNAME', 'threadcast'], { encoding: 'utf8' });
  assert.match(lib.stdout, /threadcast_append/, 'a worker loaded the function library');

  const g = await startGateway(r.url);
  for (const { assistant, p } of workers) await streamExampleRun(g, `img-py-${assistant}`, assistant, p);
  for (const { assistant, p } of workers) {
    assert.deepEqual(await p.stop('SIGTERM'), { code: 0, signal: null }, p.stderr);
    assert.doesNotMatch(p.stderr, /"level":"error"/, p.stderr);
    const live = spawnSync('redis-cli', ['-p', String(r.port), 'ZCARD', `{tc:commands}:w:${assistant}`], { encoding: 'utf8' });
    assert.equal(live.stdout.trim(), '0', `the worker of ${assistant} left the registry`);
  }
  assert.deepEqual(await g.stop('SIGTERM'), { code: 0, signal: null }, g.stderr);
  await r.cleanup();
});
