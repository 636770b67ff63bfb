#!/usr/bin/env python3
"""The benchmark scenarios of scripts/bench, against threadcast and its peers.

Each server runs pinned to core 0 (one core, one process: threadcast's loop,
the Node gateway, nginx with one worker); Redis, the load generator and the
producer share core 1. Every figure is the median of --runs runs, and each
run measures the systems one after the other with the same load, so the
ratios compare like with like. Server CPU is read from /proc/<pid>/stat
over the measured window only (connections set up beforehand).
"""
import argparse
import base64
import itertools
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, 'build-release')
LOADGEN = os.path.join(BUILD, 'loadgen')
PUBLISH = os.path.join(BUILD, 'publish')
TICK = os.sysconf('SC_CLK_TCK')
SERVER_CPU, CLIENT_CPU = '0', '1'
SOURCE = itertools.count(int(time.time()) % 997)


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def wait_port(port, proc, timeout=15):
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            raise RuntimeError(f'server exited with {proc.returncode}')
        try:
            socket.create_connection(('127.0.0.1', port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f'nothing listens on {port}')


def cpu_ticks(pid):
    """utime + stime of pid and its children so far (nginx: the worker)."""
    total = 0
    pids = [pid]
    try:
        kids = open(f'/proc/{pid}/task/{pid}/children').read().split()
        pids += [int(k) for k in kids]
    except OSError:
        pass
    for p in pids:
        try:
            f = open(f'/proc/{p}/stat').read().rsplit(')', 1)[1].split()
            total += int(f[11]) + int(f[12])
        except OSError:
            pass
    return total


def rss_kb(pid):
    total = 0
    pids = [pid]
    try:
        pids += [int(k) for k in open(f'/proc/{pid}/task/{pid}/children').read().split()]
    except OSError:
        pass
    for p in pids:
        try:
            for line in open(f'/proc/{p}/status'):
                if line.startswith('VmRSS:'):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total


class Redis:
    def __init__(self, tmp):
        self.port = free_port()
        self.proc = subprocess.Popen(
            ['taskset', '-c', CLIENT_CPU, 'redis-server', '--port', str(self.port), '--bind', '127.0.0.1',
             '--save', '', '--appendonly', 'no', '--dir', tmp, '--loglevel', 'warning'],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port, self.proc)
        self.url = f'redis://127.0.0.1:{self.port}'

    def cmd(self, *args):
        return subprocess.run(['redis-cli', '-p', str(self.port), *args], capture_output=True, text=True).stdout

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


class Server:
    """One system under test: threadcast, the Node gateway, or nginx+nchan."""

    def __init__(self, kind, tmp, redis):
        self.kind, self.tmp, self.redis = kind, tmp, redis
        self.port = free_port()
        if kind == 'threadcast':
            env = dict(os.environ, THREADCAST_AUTH='off')
            argv = [os.path.join(BUILD, 'threadcast'), '--port', str(self.port), '--host', '127.0.0.1',
                    '--redis-url', redis.url, '--log-level', 'warn', '--max-connections', '200000',
                    '--max-queue-bytes', str(64 << 20)]
        elif kind == 'node':
            env = dict(os.environ)
            argv = ['node', os.path.join(ROOT, 'tests/bench/node-gateway/gateway.js'), str(self.port), str(redis.port)]
        else:
            env = dict(os.environ)
            d = tempfile.mkdtemp(dir=tmp)
            conf = open(os.path.join(ROOT, 'tests/bench/nchan.conf')).read()
            storage, upstream = '', ''
            if kind == 'nchan-redis':
                upstream = f'upstream tc_redis {{ nchan_redis_server {redis.url}; }}'
                storage = 'nchan_redis_pass tc_redis;'
            conf = (conf.replace('@DIR@', d).replace('@PORT@', str(self.port))
                    .replace('@STORAGE@', storage).replace('@UPSTREAM@', upstream))
            path = os.path.join(d, 'nginx.conf')
            open(path, 'w').write(conf)
            argv = ['nginx', '-c', path, '-p', d, '-e', os.path.join(d, 'error.log')]
        self.proc = subprocess.Popen(['taskset', '-c', SERVER_CPU] + argv, env=env,
                                     stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, f'{kind}.log'), 'a'))
        wait_port(self.port, self.proc)
        time.sleep(0.3)
        self.pid = self.proc.pid  # taskset execs the server: the pid is the server's own

    def stop(self):
        # threadcast would drain its clients over --drain-spread first; nothing is measured now.
        self.proc.send_signal(signal.SIGTERM if self.kind != 'threadcast' else signal.SIGKILL)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def loadgen(server, **kw):
    args = ['taskset', '-c', CLIENT_CPU, LOADGEN,
            '--port', str(server.port)]
    if server.kind.startswith('nchan'):
        kw.setdefault('path', '/sub/%s')
        kw['subscribe'] = 0
    for k, v in kw.items():
        args += [f'--{k}', str(v)]
    return subprocess.Popen(args, stdout=subprocess.PIPE, text=True)


def publish(server, redis, **kw):
    args = ['taskset', '-c', CLIENT_CPU, PUBLISH, '--redis-url', redis.url]
    if server.kind.startswith('nchan'):
        args += ['--nchan', f'127.0.0.1:{server.port}']
    for k, v in kw.items():
        args += [f'--{k}', str(v)]
    out = subprocess.run(args, capture_output=True, text=True, timeout=600)
    if out.returncode:
        raise RuntimeError(f'publish failed: {out.stderr}')
    return json.loads(out.stdout)


def wait_ready(lg):
    """Reads loadgen's {"ready":N} line, printed once every connection upgraded or failed
    (its --duration bounds the wait)."""
    line = lg.stdout.readline()
    if not line.startswith('{"ready"'):
        raise RuntimeError(f'loadgen: {line}')


def result(lg):
    out, _ = lg.communicate(timeout=900)
    lines = [l for l in out.splitlines() if l.startswith('{"conns"')]
    if not lines:
        raise RuntimeError(f'loadgen printed {out!r}')
    return json.loads(lines[-1])


def delivery(kind, tmp, redis, *, conns, threads, count, rate, size):
    """Subscribers connect and idle; then count events at rate; server CPU per delivered event."""
    srv = Server(kind, tmp, redis)
    try:
        thread = f'b{time.monotonic_ns()}'  # loadgen and publish name the threads <thread>-<i>
        lg = loadgen(srv, thread=thread, conns=conns, threads=threads, expect=count // threads,
                     duration=120, hold=600)
        wait_ready(lg)
        time.sleep(1.0)  # subscribe commands answered, Redis subscriptions made
        t0, c0 = time.time(), cpu_ticks(srv.pid)
        pub = publish(srv, redis, threads=thread, nthreads=threads if threads > 1 else 0,
                      count=count, rate=rate, size=size)
        r = result(lg)
        c1 = cpu_ticks(srv.pid)
        r['server_cpu_s'] = (c1 - c0) / TICK
        r['us_per_event'] = r['server_cpu_s'] * 1e6 / max(1, r['received'])
        r['published_rate'] = pub['rate']
        r['rss_kb'] = rss_kb(srv.pid)
        r['delivered_per_s'] = r['received'] / max(1e-9, time.time() - t0)
        return r
    finally:
        srv.stop()


def idle_memory(kind, tmp, redis, *, conns):
    srv = Server(kind, tmp, redis)
    try:
        before = rss_kb(srv.pid)
        # ~20,000 connections per source address (the ephemeral ports), and fresh
        # addresses each run: the last run's sockets may still be closing.
        nsrc = max(1, (conns + 19999) // 20000)
        sources = ','.join(f'127.0.{1 + (n // 250) % 250}.{2 + n % 250}'
                           for n in (next(SOURCE) for _ in range(nsrc)))
        lg = loadgen(srv, thread=f'idle{time.monotonic_ns()}', conns=conns, threads=100,
                     hold=10, sources=sources, duration=300)
        t0 = time.time()
        wait_ready(lg)
        setup = time.time() - t0
        time.sleep(6)  # settled: each system's periodic housekeeping has run
        after = rss_kb(srv.pid)
        r = result(lg)
        if r['failed']:
            raise RuntimeError(f"{r['failed']} of {conns} connections failed")
        return {'conns': conns, 'connected': r['connected'], 'rss_before_kb': before, 'rss_after_kb': after,
                'kib_per_conn': (after - before) / max(1, r['connected']),
                'connects_per_s': r['connected'] / max(1e-9, setup)}
    finally:
        srv.stop()


def replay(kind, tmp, redis, *, events):
    srv = Server(kind, tmp, redis)
    try:
        thread = f'replay{time.monotonic_ns()}'
        publish(srv, redis, threads=thread, count=events + 1, rate=0, size=200)
        # The client saw the first event only: it reconnects from there,
        # with the subscription id it would hold (ids are self-describing).
        epoch = redis.cmd('HGET', f'tc:{{{thread}}}:meta', 'epoch').strip()
        sub_id = 's1.' + base64.urlsafe_b64encode(b'{"channels":["tasks"]}').decode().rstrip('=')
        command = json.dumps({'id': 1, 'method': 'subscription.reconnect', 'params': {
            'runId': '', 'lastEventId': f'{epoch}:1', 'subscriptions': [sub_id]}})
        c0 = cpu_ticks(srv.pid)
        lg = loadgen(srv, thread=thread, conns=1, expect=events, duration=300, command=command)
        r = result(lg)
        r['server_cpu_s'] = (cpu_ticks(srv.pid) - c0) / TICK
        r['events_per_s'] = r['received'] / max(1e-9, r['seconds'] - r['connect_seconds'])
        return r
    finally:
        srv.stop()


def append_path(kind, tmp, redis, *, events):
    """The producer contract alone: Redis CPU per appended event, single
    (threadcast_append) and batched by 16 (threadcast_append_batch), beside a
    plain pipelined XADD of the same payload in the same run. No subscriber."""
    srv = Server(kind, tmp, redis)  # loads the function library
    try:
        out = {}
        for name, extra in (('xadd', {'xadd': 1}), ('single', {}), ('batch16', {'batch': 16})):
            thread = f'append-{name}-{time.monotonic_ns()}'
            c0 = cpu_ticks(redis.proc.pid)
            r = publish(srv, redis, threads=thread, count=events, rate=0, size=200, **extra)
            cpu = (cpu_ticks(redis.proc.pid) - c0) / TICK
            out[f'{name}_per_core'] = events / max(cpu, 1e-9)
            out[f'{name}_per_s'] = r['rate']
            redis.cmd('DEL', f'tc:{{{thread}}}:events', f'tc:{{{thread}}}:plain')
        out['single_vs_xadd'] = out['single_per_core'] / out['xadd_per_core']
        out['batch16_vs_xadd'] = out['batch16_per_core'] / out['xadd_per_core']
        return out
    finally:
        srv.stop()


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--runs', type=int, default=3)
    ap.add_argument('--only', default='a,a-full,a10k,b,b1,c,d,e,append')
    ap.add_argument('--systems', default='threadcast,nchan,node')
    ap.add_argument('--quick', action='store_true', help='smaller counts, one run')
    ap.add_argument('--out', default=os.path.join(ROOT, 'bench-results'))
    args = ap.parse_args()
    if args.quick:
        args.runs = 1
    only = args.only.split(',')
    systems = args.systems.split(',')
    q = 0.2 if args.quick else 1.0
    tmp = tempfile.mkdtemp(prefix='threadcast-bench.')
    redis = Redis(tmp)
    scenarios = {
        'a': ('fan-out: 1 thread, 1,000 subscribers, 100 events/s of 200 B',
              lambda k: delivery(k, tmp, redis, conns=1000, threads=1, count=int(1000 * q), rate=100, size=200)),
        'a-full': ('fan-out: 1 thread, 1,000 subscribers, 200 B events at full speed',
                   lambda k: delivery(k, tmp, redis, conns=1000, threads=1, count=int(2000 * q), rate=0, size=200)),
        'a10k': ('fan-out: 1 thread, 10,000 subscribers, 10 events/s of 200 B',
                 lambda k: delivery(k, tmp, redis, conns=10000, threads=1, count=int(100 * q), rate=10, size=200)),
        'b': ('many threads: 10,000 threads x 1 subscriber, 10,000 events/s spread evenly',
              lambda k: delivery(k, tmp, redis, conns=10000, threads=10000, count=int(100000 * q), rate=10000, size=200)),
        # b's control: the same event rate and one recipient per event, but one
        # thread: b/b1 is what watching 10,000 threads costs per event.
        'b1': ('control for b: 1 thread x 1 subscriber, 10,000 events/s',
               lambda k: delivery(k, tmp, redis, conns=1, threads=1, count=int(100000 * q), rate=10000, size=200)),
        'c': ('idle memory: 10,000 idle WebSockets',
              lambda k: idle_memory(k, tmp, redis, conns=10000)),
        'c50k': ('idle memory: 50,000 idle WebSockets',
                 lambda k: idle_memory(k, tmp, redis, conns=50000)),
        'd': ('replay: one client 100,000 events behind',
              lambda k: replay(k, tmp, redis, events=int(100000 * q))),
        'append': ('append path: 200 B events appended as fast as Redis answers, no subscriber',
                   lambda k: append_path(k, tmp, redis, events=int(200000 * q))),
        'e': ('token stream: 1,000 threads x 3 subscribers, 10 tokens/s each (10,000 events/s)',
              lambda k: delivery(k, tmp, redis, conns=3000, threads=1000, count=int(100000 * q), rate=10000, size=60)),
    }
    results = {}
    try:
        for name in only:
            title, fn = scenarios[name]
            results[name] = {'title': title}
            for kind in systems:
                if name in ('d', 'append') and kind != 'threadcast':
                    continue  # the peers keep no per-thread history, and have no append path of their own
                runs = []
                for i in range(args.runs):
                    try:
                        runs.append(fn(kind))
                    except Exception as e:  # a failed run is reported, not hidden
                        runs.append({'error': str(e)})
                    print(f'{name} {kind} run {i + 1}: {json.dumps(runs[-1])}', file=sys.stderr, flush=True)
                results[name][kind] = runs
    finally:
        redis.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(args.out, exist_ok=True)
    stamp = time.strftime('%Y%m%d-%H%M%S')
    path = os.path.join(args.out, f'bench-{stamp}.json')
    json.dump(results, open(path, 'w'), indent=1)
    report(results, systems)
    print(f'\nresults: {path}')


def report(results, systems):
    def med(runs, key):
        return median([r.get(key) for r in runs if 'error' not in r])

    def fmt(v, unit=''):
        return '—' if v is None else (f'{v:,.2f}{unit}' if isinstance(v, float) and v < 100 else f'{v:,.0f}{unit}')

    print('\n| scenario | metric | ' + ' | '.join(systems) + ' | threadcast / ' + ' | threadcast / '.join(systems[1:]) + ' |')
    print('|---|---|' + '---|' * (2 * len(systems) - 1))
    for name, res in results.items():
        metrics = [('us_per_event', 'server CPU µs / delivered event'), ('latency_p50_ms', 'latency p50 ms'),
                   ('latency_p99_ms', 'latency p99 ms'), ('lost', 'missing + duplicated'),
                   ('kib_per_conn', 'RSS KiB / idle connection'), ('connects_per_s', 'connections set up / s'),
                   ('events_per_s', 'replayed events / s'), ('delivered_per_s', 'delivered events / s'),
                   ('xadd_per_core', 'plain XADD: events / s per Redis core'),
                   ('single_per_core', 'threadcast_append: events / s per Redis core'),
                   ('batch16_per_core', 'threadcast_append_batch of 16: events / s per Redis core'),
                   ('single_vs_xadd', 'threadcast_append / plain XADD (same run)'),
                   ('batch16_vs_xadd', 'batch of 16 / plain XADD (same run)')]
        for runs in res.values():
            if isinstance(runs, list):
                for r in runs:
                    if 'latency_us' in r:
                        r['latency_p50_ms'] = r['latency_us']['p50'] / 1000
                        r['latency_p99_ms'] = r['latency_us']['p99'] / 1000
                        r['lost'] = r['missing'] + r['duplicates']
        for key, label in metrics:
            vals = [med(res.get(k, []), key) for k in systems]
            if all(v is None for v in vals):
                continue
            ratios = [('—' if vals[0] is None or v in (None, 0) else f'{vals[0] / v:.2f}') for v in vals[1:]]
            print(f'| {name}: {res["title"]} | {label} | ' + ' | '.join(fmt(v) for v in vals) + ' | ' + ' | '.join(ratios) + ' |')


if __name__ == '__main__':
    main()
