// deploy/: what can be checked without a Docker engine. The image's build
// steps are scripts/build, run here for real; the Dockerfile is linted and
// held to the rules the deployment relies on; compose and Kubernetes files
// are parsed and checked for the probes and wiring they must have.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, mkdtempSync, rmSync, existsSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import YAML from 'yaml';
import { repoRoot, threadcastBin, startRedis, startThreadcast, stopAll } from './lib/harness.mjs';

const require = createRequire(import.meta.url);
const { validate } = require('dockerfile-utils');
const read = (p) => readFileSync(path.join(repoRoot, p), 'utf8');

test('scripts/build (what the Dockerfile runs) installs the three binaries, which run', () => {
  const dest = mkdtempSync(path.join(tmpdir(), 'tc-dist-'));
  const r = spawnSync(path.join(repoRoot, 'scripts', 'build'), [dest], { encoding: 'utf8',
    env: { ...process.env, TC_BUILD_DIR: path.join(dest, 'build') } });
  assert.equal(r.status, 0, r.stderr);
  for (const bin of ['threadcast', 'threadcast-agent', 'threadcast-produce'])
    assert.ok(existsSync(path.join(dest, 'usr/local/bin', bin)), bin);
  const v = spawnSync(path.join(dest, 'usr/local/bin/threadcast'), ['--version'], { encoding: 'utf8' });
  assert.match(v.stdout, /^threadcast \d+\.\d+\.\d+/);
  rmSync(dest, { recursive: true, force: true });
});

// The gateway's Dockerfiles: one a Debian release, each with the runtime
// packages of the libraries a build on that release links.
const gatewayImages = [
  { file: 'deploy/Dockerfile', suite: 'bookworm', libs: [['libuv.so.1', 'libuv1'], ['libwebsockets.so.17', 'libwebsockets17'],
    ['libhiredis.so.0.14', 'libhiredis0.14'], ['libcjson.so.1', 'libcjson1'], ['libjwt.so.0', 'libjwt0']] },
  { file: 'deploy/Dockerfile.trixie', suite: 'trixie', libs: [['libuv.so.1', 'libuv1t64'],
    ['libwebsockets.so.19', 'libwebsockets19t64'], ['libhiredis.so.1.1.0', 'libhiredis1.1.0'], ['libcjson.so.1', 'libcjson1'],
    ['libjwt.so.2', 'libjwt2']] },
];

test('the Dockerfiles lint clean and keep the deployment rules', () => {
  // The binary the other tests run (THREADCAST_BIN, else build/threadcast):
  // the Dockerfile of the release it was built on installs every library it links.
  const lddRun = spawnSync('ldd', [threadcastBin], { encoding: 'utf8' });
  assert.equal(lddRun.status, 0, `ldd ${threadcastBin}: ${lddRun.stderr}`);
  const ldd = lddRun.stdout;
  let matched = 0;
  for (const { file, suite, libs } of gatewayImages) {
    const text = read(file);
    assert.deepEqual(validate(text).map((d) => d.message), [], file);
    assert.match(text, /^# Why (bookworm|trixie)/m, `${file} says why its base`);
    const froms = text.match(/^FROM .*/gm);
    assert.equal(froms.length, 2, 'multi-stage');
    assert.equal(froms[0], `FROM debian:${suite} AS build`);
    assert.equal(froms[1], `FROM debian:${suite}-slim`);
    assert.match(text, /^RUN scripts\/build \/out$/m);
    assert.match(text, /^USER 10001$/m, 'non-root');
    assert.match(text, /^HEALTHCHECK[\s\S]*?\/healthz/m);
    const runtime = text.split(`FROM debian:${suite}-slim`)[1];
    assert.doesNotMatch(runtime, /-dev\b/, 'no -dev packages at runtime');
    for (const [, pkg] of libs) assert.ok(runtime.includes(pkg), `${file} installs ${pkg}`);
    assert.ok(runtime.includes('libwebsockets-evlib-uv'), 'the libuv event-loop plugin');
    if (ldd.includes(libs[1][0])) {
      matched++;
      for (const [lib] of libs) assert.ok(ldd.includes(lib), `threadcast links ${lib}`);
    }
    // Only files that exist are copied in.
    for (const m of text.matchAll(/^COPY (?!--from)(.+) \S+$/gm))
      for (const src of m[1].split(' ')) assert.ok(existsSync(path.join(repoRoot, src)), src);
  }
  assert.equal(matched, 1, `a Dockerfile for the libwebsockets threadcast links: ${ldd}`);
});

test('the worker\'s Dockerfile lints clean and keeps the deployment rules', () => {
  const text = read('deploy/Dockerfile.worker');
  assert.deepEqual(validate(text).map((d) => d.message), []);
  const froms = text.match(/^FROM .*/gm);
  assert.deepEqual(froms, ['FROM debian:bookworm-slim AS build', 'FROM debian:bookworm-slim'], 'multi-stage');
  const [build, runtime] = text.split(/^FROM debian:bookworm-slim$/m);
  // The dependencies from the lock file, without devDependencies or install scripts.
  assert.match(build, /^COPY src\/worker\/package\.json src\/worker\/package-lock\.json \.\/$/m);
  assert.match(build, /npm ci --omit=dev --ignore-scripts/);
  // worker.js finds the function library beside itself: there is no protocol/ in the image.
  assert.match(build, /^COPY protocol\/redis\/threadcast\.lua \.\/threadcast\.lua$/m);
  assert.match(runtime, /^USER 10002$/m, 'non-root');
  assert.doesNotMatch(runtime, /\bnpm\b|apt-get install/, 'no npm, no packages at runtime: the node binary and the app only');
  assert.match(runtime, /^ENTRYPOINT \["node", "\/opt\/threadcast-worker\/bin\/threadcast-worker\.js"\]$/m);
  assert.ok(existsSync(path.join(repoRoot, 'src/worker/bin/threadcast-worker.js')), 'the entry script exists');
  // Only files that exist are copied in.
  for (const m of text.matchAll(/^COPY (?!--from)(.+) \S+$/gm))
    for (const src of m[1].split(' ')) assert.ok(existsSync(path.join(repoRoot, src)), src);
});

test('the Python worker\'s Dockerfile lints clean and keeps the deployment rules', () => {
  const text = read('deploy/Dockerfile.worker-python');
  assert.deepEqual(validate(text).map((d) => d.message), []);
  assert.match(text, /^# Why bookworm/m, 'says why its base');
  const froms = text.match(/^FROM .*/gm);
  assert.deepEqual(froms, ['FROM debian:bookworm-slim AS build', 'FROM debian:bookworm-slim'], 'multi-stage');
  const [build, runtime] = text.split(/^FROM debian:bookworm-slim$/m);
  // The lock's dependencies, each checked against its hash, none resolved; then the package alone.
  assert.match(build, /^COPY src\/worker-python\/requirements\.lock \.\/$/m);
  assert.match(build, /pip install [^\n]*--require-hashes --no-deps[^\n]*\\\n\s*-r requirements\.lock$/m);
  assert.match(build, /pip install [^\n]*--no-deps[^\n]*\\\n\s*--no-build-isolation \/src\/worker-python /m);
  // pip trusts the builder's CAs through a secret, never a file copied into a layer.
  assert.match(build, /--mount=type=secret,id=ca-certificates/);
  assert.doesNotMatch(text, /^COPY .*ca-certificates/m);
  // loops.py finds the function library beside the package: there is no protocol/ in the image.
  assert.match(build, /^COPY protocol\/redis\/threadcast\.lua /m);
  assert.match(build, /install -m 644 \/src\/threadcast\.lua "\$pkg\/threadcast\.lua"/);
  // Debian's interpreter at runtime, no venv module, no compiler; a non-root user; the example project as the default.
  assert.match(runtime, /apt-get install -y --no-install-recommends python3 \\$/m);
  assert.doesNotMatch(runtime, /python3-venv|python3-pip|gcc|-dev\b/);
  assert.match(runtime, /^USER 10003$/m, 'non-root');
  assert.match(runtime, /^COPY src\/worker-python\/example \/project$/m);
  assert.match(runtime, /^ENTRYPOINT \["\/opt\/threadcast-worker-python\/venv\/bin\/threadcast-worker-python"\]$/m);
  assert.match(runtime, /^CMD \["--config", "\/project\/langgraph\.json", "--redis-url", "redis:\/\/redis:6379"\]$/m);
  // The console script the ENTRYPOINT runs is the package's.
  assert.match(read('src/worker-python/pyproject.toml'), /^threadcast-worker-python = "threadcast_worker\.cli:main"$/m);
  // Only files that exist are copied in.
  for (const m of text.matchAll(/^COPY (?!--from)(.+) \S+$/gm))
    for (const src of m[1].split(' ')) assert.ok(existsSync(path.join(repoRoot, src)), src);
});

/** The project file compose and Kubernetes give the Python workers: the example project, renamed. */
function assertPythonProjectFile(text, where) {
  const conf = JSON.parse(text);
  // The graph is the image's example project (/project is src/worker-python/example), under an id
  // of its own: "agent" is the JavaScript example's, which the JavaScript workers serve beside it.
  assert.deepEqual(Object.keys(conf.graphs), ['agent-python'], where);
  const [file, attr] = conf.graphs['agent-python'].split(':');
  assert.ok(file.startsWith('/project/'), `${where}: a path in the image's project`);
  const example = path.join(repoRoot, 'src/worker-python/example', file.slice('/project/'.length));
  assert.ok(existsSync(example), `${where}: ${example} exists`);
  assert.match(readFileSync(example, 'utf8'), new RegExp(`^${attr}\\b.*=`, 'm'), `${where}: it defines ${attr}`);
  const own = JSON.parse(read('src/worker-python/example/langgraph.json'));
  assert.deepEqual(conf.env, own.env, `${where}: the example's env`);
  return conf;
}

test('the compose file wires redis, two replicas, two LangGraph workers, two Python workers and the balancer', () => {
  const c = YAML.parse(read('deploy/docker-compose.yml'));
  assert.deepEqual(Object.keys(c.services).sort(),
    ['lb', 'redis', 'threadcast-1', 'threadcast-2', 'worker-1', 'worker-2', 'worker-python-1', 'worker-python-2']);
  assert.ok(c.services.redis.command.includes('--appendonly'));
  // The tags are the ones scripts/images builds, from the same Dockerfiles.
  const table = new Map([...read('scripts/images').matchAll(/^\s*"([\w-]+) (\S+) (\S+) \w+"$/gm)].map((m) => [m[2], m[3]]));
  for (const r of ['threadcast-1', 'threadcast-2']) {
    assert.equal(c.services[r].environment.THREADCAST_REDIS_URL, 'redis://redis:6379');
    assert.equal(c.services[r].build.dockerfile, 'deploy/Dockerfile');
    assert.equal(table.get(c.services[r].image), 'deploy/Dockerfile', c.services[r].image);
  }
  for (const w of ['worker-1', 'worker-2']) {
    const s = c.services[w];
    assert.equal(s.build.dockerfile, 'deploy/Dockerfile.worker');
    assert.equal(table.get(s.image), 'deploy/Dockerfile.worker', s.image);
    const cmd = s.command;
    assert.equal(cmd[cmd.indexOf('--redis-url') + 1], 'redis://redis:6379');
    assert.equal(s.depends_on.redis.condition, 'service_healthy');
    assert.ok(!cmd.includes('--name'), 'each worker names itself (hostname, pid): two must not share a name');
  }
  for (const w of ['worker-python-1', 'worker-python-2']) {
    const s = c.services[w];
    assert.equal(s.build.dockerfile, 'deploy/Dockerfile.worker-python');
    assert.equal(table.get(s.image), 'deploy/Dockerfile.worker-python', s.image);
    const cmd = s.command;
    assert.equal(cmd[cmd.indexOf('--redis-url') + 1], 'redis://redis:6379');
    assert.equal(s.depends_on.redis.condition, 'service_healthy');
    assert.ok(!cmd.includes('--name'), 'each worker names itself');
    assert.ok(s.stop_grace_period, 'room for the runs in hand to finish');
    // --config names the project file mounted beside it, from deploy/.
    const config = cmd[cmd.indexOf('--config') + 1];
    const mount = s.volumes.map((v) => v.split(':')).find(([, target]) => target === config);
    assert.ok(mount, `${w}: ${config} is mounted`);
    assertPythonProjectFile(read(path.join('deploy', mount[0])), `${w}: ${mount[0]}`);
  }
  const lb = c.services.lb;
  assert.equal(lb.environment.TC_BACKEND_1, 'threadcast-1:8080');
  assert.equal(lb.environment.TC_BACKEND_2, 'threadcast-2:8080');
  assert.ok(lb.volumes[0].startsWith('./haproxy.cfg:'));
  // The balancer config itself is what balancer.test.mjs runs with a real HAProxy.
  assert.match(read('deploy/haproxy.cfg'), /option httpchk GET \/readyz/);
});

test('Kubernetes: probes, preStop drain, PodDisruptionBudget, Service, non-root', () => {
  const docs = YAML.parseAllDocuments(read('deploy/k8s/threadcast.yaml')).map((d) => d.toJS());
  const kinds = docs.map((d) => d.kind);
  assert.deepEqual(kinds, ['Deployment', 'PodDisruptionBudget', 'Service']);
  const pod = docs[0].spec.template.spec;
  const ctr = pod.containers[0];
  assert.equal(ctr.readinessProbe.httpGet.path, '/readyz');
  assert.equal(ctr.livenessProbe.httpGet.path, '/healthz');
  assert.ok(ctr.lifecycle.preStop, 'preStop');
  const env = (n) => Number(ctr.env.find((e) => e.name === n)?.value);
  const preStop = Number(/sleep (\d+)/.exec(ctr.lifecycle.preStop.exec.command.join(' '))[1]) * 1000;
  assert.ok(pod.terminationGracePeriodSeconds * 1000 >
    preStop + env('THREADCAST_DRAIN_GRACE') + 2000 /* --drain-spread's default */ + env('THREADCAST_DRAIN_TIMEOUT'),
    'the pod\'s grace period covers the preStop pause, the drain\'s grace, its spread and its timeout');
  assert.equal(pod.securityContext.runAsNonRoot, true);
  assert.deepEqual(docs[1].spec.selector, docs[0].spec.selector);
  assert.deepEqual(docs[2].spec.selector, docs[0].spec.selector.matchLabels);
  const agent = YAML.parse(read('deploy/k8s/agent.yaml'));
  assert.match(agent.spec.template.spec.containers[0].command[0], /threadcast-agent$/);
  const worker = YAML.parse(read('deploy/k8s/worker.yaml'));
  const wpod = worker.spec.template.spec;
  assert.equal(wpod.containers[0].image, 'threadcast-worker:latest');
  assert.equal(wpod.securityContext.runAsUser, 10002, 'the worker image\'s user');
  assert.ok(wpod.terminationGracePeriodSeconds > 10, 'room for the runs in hand to finish');
  assert.deepEqual(wpod.containers[0].args.slice(0, 1), ['--redis-url']);
  // The Python workers: the same pod rules as worker.yaml's, their own image and user, the
  // example project served under its own id from the ConfigMap.
  const pdocs = YAML.parseAllDocuments(read('deploy/k8s/worker-python.yaml')).map((d) => d.toJS());
  assert.deepEqual(pdocs.map((d) => d.kind), ['ConfigMap', 'Deployment']);
  const [cm, pdep] = pdocs;
  const ppod = pdep.spec.template.spec;
  const pctr = ppod.containers[0];
  assert.equal(pctr.image, 'threadcast-worker-python:latest');
  const table = new Map([...read('scripts/images').matchAll(/^\s*"([\w-]+) (\S+) (\S+) \w+"$/gm)].map((m) => [m[2], m[3]]));
  assert.equal(table.get(pctr.image), 'deploy/Dockerfile.worker-python');
  assert.deepEqual(ppod.securityContext, { runAsNonRoot: true, runAsUser: 10003 }, 'the Python image\'s user');
  assert.match(read('deploy/Dockerfile.worker-python'), new RegExp(`^USER ${ppod.securityContext.runAsUser}$`, 'm'));
  assert.equal(ppod.terminationGracePeriodSeconds, wpod.terminationGracePeriodSeconds);
  assert.deepEqual(pctr.resources, worker.spec.template.spec.containers[0].resources);
  assert.deepEqual(pdep.spec.selector.matchLabels, pdep.spec.template.metadata.labels);
  assert.notDeepEqual(pdep.spec.selector, worker.spec.selector, 'a selector of its own');
  const arg = (n) => pctr.args[pctr.args.indexOf(n) + 1];
  assert.equal(arg('--redis-url'), 'redis://redis:6379');
  const mount = pctr.volumeMounts.find((m) => arg('--config').startsWith(`${m.mountPath}/`));
  assert.ok(mount, `${arg('--config')} is mounted`);
  const vol = ppod.volumes.find((v) => v.name === mount.name);
  assert.equal(vol.configMap.name, cm.metadata.name);
  const conf = assertPythonProjectFile(cm.data[path.basename(arg('--config'))], 'the ConfigMap');
  assert.deepEqual(conf, JSON.parse(read('deploy/langgraph-python.json')), 'compose and Kubernetes serve the same');
});

test("the image's HEALTHCHECK command passes against a running threadcast, and fails without one", async () => {
  const text = read('deploy/Dockerfile').replace(/\\\n\s*/g, '');
  const cmd = JSON.parse(text.match(/^HEALTHCHECK .* CMD (\[.*\])$/m)[1]);
  const redis = await startRedis();
  const tc = await startThreadcast({ redisUrl: redis.url });
  const ok = spawnSync(cmd[0], cmd.slice(1), { env: { ...process.env, THREADCAST_PORT: String(tc.port) }, encoding: 'utf8' });
  assert.equal(ok.status, 0, ok.stderr);
  await tc.stop();
  const down = spawnSync(cmd[0], cmd.slice(1), { env: { ...process.env, THREADCAST_PORT: String(tc.port) }, encoding: 'utf8' });
  assert.notEqual(down.status, 0);
  await stopAll();
  await redis.cleanup();
});
