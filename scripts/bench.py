#!/usr/bin/env python3
"""The benchmark scenarios of scripts/bench, against threadcast and its peers.

Each server runs pinned to core 0 (one core, one process: threadcast's loop,
the Node gateway, nginx with one worker, the blaster); Redis, the load
generator and the producer share core 1. Every figure is the median of --runs
runs, and each run measures the systems one after the other with the same
load, so the ratios compare like with like. CPU is read from /proc/<pid>/stat
(utime and stime apart) of the server and of Redis over the measured window
only (connections set up beforehand).

The blaster (src/bench/blaster.c) is the control of every fan-out scenario:
a server that does nothing but write each event's pre-built frame to each
subscriber, one write per frame. Every CPU figure is also given as a ratio to
the blaster's in the same run (the median of the per-run ratios).

The rest scenario (issue 25) compares the Agent Protocol's REST run streams
with WebSockets on threadcast alone: one run of a token stream (publish --run:
text deltas, a tool call streamed in chunks, tool events, updates, values and
checkpoints; ~5,000 events paced at 250/s, each stamped with its send time)
is watched, on a fresh gateway each, by 100 REST viewers (loadgen --sse-get:
GET /threads/:t/runs/:r/stream with Last-Event-ID: -1 and stream_mode values,
messages-tuple and updates) and then by 100 WebSockets with the SDK's four
subscriptions (0.0.21 route), every viewer attached before the run's first
event. The run is a REST run (runs.create, for an assistant the bench
registers); publish --run is its worker (run.started, the events with the
run's id on its root "started", run.finished). Server CPU is given per
delivered unit (an SSE unit; a WebSocket frame) and per source event and
viewer, and REST / WebSocket within each run (the sides alternate which goes
first). Every viewer must get every unit once with rising ids: the counts
are checked against what the run makes (publish --dry-run). --threadcast
measures another gateway binary (an older commit's build) with these tools.

The tokens scenario (issue 29) runs real LangGraph runs beside LangGraph's own
Agent Server (@langchain/langgraph-api, its in-memory dev server, pinned in
tests/bench/agent-server/): both serve tests/bench/agent-server/graph.mjs, a
fake chat model that streams --tokens tokens a run, each stamped with its
emission time (CLOCK_MONOTONIC, µs, in the token's text). threadcast's side
is redis-server, the gateway and the LangGraph worker, all three pinned to
the server core, against the Agent Server's one process on the same core. The
clients (clients.mjs, the official SDK, pinned to the client core) are spread
over --tokens-clients processes; per cell (--tokens-cells: runs x viewers @
pace / route) every run starts at once: a starter (runs.stream,
messages-tuple), viewers joined from the run's start (runs.joinStream with
Last-Event-ID -1, as useStream does; or ThreadStreams on the WebSocket
route, subscribed before the run), optionally one more joining halfway. Per
token: receipt minus stamp, for starters and viewers apart; TTFT; the late
joiner's catch-up; CPU per delivered token per server process; each client
process's share of a core (none may be saturated for the latency to be the
server's); every token must reach every stream once.

The tokens-py scenario (issue 37) is the same for Python graphs: threadcast
with its Python worker (threadcast-worker-python --config) beside LangGraph's
Python server (langgraph dev from langgraph-cli[inmem], the in-memory
runtime, --no-reload, --n-jobs-per-worker the cell's runs), both serving
tests/bench/agent-server-py/ (graph.py, graph.mjs's twin), both from the venv
scripts/lib.sh's tc_python_env dev makes; the same clients and cells syntax
(--tokens-py-cells), its ratios and latency differences taken per bench run.
Each cell also says how long the server side's processes waited, runnable,
for their core (schedstat) and the load average: on a shared machine, whether
the latency read is the servers'.
"""
import argparse
import base64
import resource
import itertools
import json
import os
import shutil
import signal
import random
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get('TC_BENCH_BUILD') or os.path.join(ROOT, 'build-release')  # tests: their build
LOADGEN = os.path.join(BUILD, 'loadgen')
PUBLISH = os.path.join(BUILD, 'publish')
BLASTER = os.path.join(BUILD, 'blaster')
# The gateway measured: the build's, or (--threadcast, kept in the environment for the storm's
# child process) another binary, e.g. an older commit's, driven by these tools.
THREADCAST = os.environ.get('TC_BENCH_THREADCAST') or os.path.join(BUILD, 'threadcast')
TICK = os.sysconf('SC_CLK_TCK')
SERVER_CPU, CLIENT_CPU = '0', '1'
SOURCE = itertools.count(int(time.time()) % 997)


def free_port():
    """A port on 127.0.0.1 nothing is bound to, outside the kernel's ephemeral
    range (one from inside it can become some outgoing connection's local port
    before the server binds it; the load clients make thousands)."""
    try:
        with open('/proc/sys/net/ipv4/ip_local_port_range') as f:
            lo, hi = map(int, f.read().split())
    except OSError:
        lo, hi = 32768, 60999
    base, span = (10000, lo - 10000) if lo > 11024 else (hi + 1, 65535 - hi)
    for _ in range(200):
        port = base + random.randrange(span)
        with socket.socket() as s:
            try:
                s.bind(('127.0.0.1', port))
                return port
            except OSError:
                continue
    raise RuntimeError('no free port found')


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


def cpu_split(pid):
    """(utime, stime) of pid and its children so far (nginx: the worker), in ticks."""
    user = system = 0
    pids = [pid]
    try:
        kids = open(f'/proc/{pid}/task/{pid}/children').read().split()
        pids += [int(k) for k in kids]
    except OSError:
        pass
    for p in pids:
        try:
            f = open(f'/proc/{p}/stat').read().rsplit(')', 1)[1].split()
            user += int(f[11])
            system += int(f[12])
        except OSError:
            pass
    return user, system


def cpu_ticks(pid):
    """utime + stime of pid and its children so far."""
    return sum(cpu_split(pid))


class CpuWindow:
    """User and kernel CPU of the server and of Redis between start() and stop()."""

    def __init__(self, srv, redis):
        self.pids = {'server': srv.pid, 'redis': redis.proc.pid}

    def start(self):
        self.t0 = {k: cpu_split(p) for k, p in self.pids.items()}
        return self

    def stop(self):
        out = {}
        for k, p in self.pids.items():
            u, s = cpu_split(p)
            out[f'{k}_user_s'] = (u - self.t0[k][0]) / TICK
            out[f'{k}_sys_s'] = (s - self.t0[k][1]) / TICK
        out['server_cpu_s'] = out['server_user_s'] + out['server_sys_s']
        out['redis_cpu_s'] = out['redis_user_s'] + out['redis_sys_s']
        return out


def per_event(r, n):
    """CPU per delivered event, µs: the server's (user, kernel), Redis', and both."""
    n = max(1, n)
    r['us_per_event'] = r['server_cpu_s'] * 1e6 / n
    r['user_us_per_event'] = r['server_user_s'] * 1e6 / n
    r['sys_us_per_event'] = r['server_sys_s'] * 1e6 / n
    r['redis_us_per_event'] = r['redis_cpu_s'] * 1e6 / n
    r['redis_user_us_per_event'] = r['redis_user_s'] * 1e6 / n
    r['redis_sys_us_per_event'] = r['redis_sys_s'] * 1e6 / n
    r['total_us_per_event'] = (r['server_cpu_s'] + r['redis_cpu_s']) * 1e6 / n


def runq_wait_s(pid):
    """Seconds the threads of pid (not its children) have waited on a run queue, runnable but
    not running (/proc/<pid>/task/*/schedstat, its second field): on this shared machine, how
    much other tenants held the core a server is pinned to."""
    total = 0
    try:
        tasks = os.listdir(f'/proc/{pid}/task')
    except OSError:
        return 0.0
    for t in tasks:
        try:
            total += int(open(f'/proc/{pid}/task/{t}/schedstat').read().split()[1])
        except (OSError, IndexError, ValueError):
            pass
    return total / 1e9


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
            argv = [THREADCAST, '--port', str(self.port), '--host', '127.0.0.1',
                    '--redis-url', redis.url, '--log-level', 'warn', '--max-connections', '200000',
                    '--max-queue-bytes', str(64 << 20)]
        elif kind == 'node':
            env = dict(os.environ)
            argv = ['node', os.path.join(ROOT, 'tests/bench/node-gateway/gateway.js'), str(self.port), str(redis.port)]
        elif kind == 'blaster':
            env = dict(os.environ)
            argv = [BLASTER, '--port', str(self.port), '--host', '127.0.0.1']
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
        kw['path'] = '/sub/%s'  # nchan streams on connect: no command
        kw['subscribe'] = 0
        kw.pop('commands', None)
    for c in kw.pop('commands', []):  # the blaster reads none of them: it sends to every connection
        args += ['--command', c]
    for k, v in kw.items():
        args += [f'--{k}', str(v)]
    return subprocess.Popen(args, stdout=subprocess.PIPE, text=True)


def publish(server, redis, **kw):
    args = ['taskset', '-c', CLIENT_CPU, PUBLISH, '--redis-url', redis.url]
    if server.kind.startswith('nchan') or server.kind == 'blaster':
        args += ['--http', f'127.0.0.1:{server.port}']
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


def delivery(kind, tmp, redis, *, conns, threads, count, rate, size, lg_args=None, pub_args=None):
    """Subscribers connect and idle; then count events at rate; CPU per delivered event."""
    srv = Server(kind, tmp, redis)
    try:
        thread = f'b{time.monotonic_ns()}'  # loadgen and publish name the threads <thread>-<i>
        lg = loadgen(srv, thread=thread, conns=conns, threads=threads, expect=count // threads,
                     duration=120, hold=600, **(lg_args or {}))
        wait_ready(lg)
        time.sleep(1.0)  # subscribe commands answered, Redis subscriptions made
        t0, cpu = time.time(), CpuWindow(srv, redis).start()
        pub = publish(srv, redis, threads=thread, nthreads=threads if threads > 1 else 0,
                      count=count, rate=rate, size=size, **(pub_args or {}))
        r = result(lg)
        r.update(cpu.stop())
        per_event(r, r['received'])
        r['bytes_per_event'] = r['event_bytes'] / max(1, r['received'])
        r['wire_bytes_per_event'] = r.get('wire_bytes', 0) / max(1, r['received'])
        r['published_rate'] = pub['rate']
        r['rss_kb'] = rss_kb(srv.pid)
        r['delivered_per_s'] = r['received'] / max(1e-9, time.time() - t0)
        return r
    finally:
        srv.stop()


def idle_memory(kind, tmp, redis, *, conns, lg_args=None):
    srv = Server(kind, tmp, redis)
    try:
        before = rss_kb(srv.pid)
        # ~20,000 connections per source address (the ephemeral ports), and fresh
        # addresses each run: the last run's sockets may still be closing.
        nsrc = max(1, (conns + 19999) // 20000)
        sources = ','.join(f'127.0.{1 + (n // 250) % 250}.{2 + n % 250}'
                           for n in (next(SOURCE) for _ in range(nsrc)))
        lg = loadgen(srv, thread=f'idle{time.monotonic_ns()}', conns=conns, threads=100,
                     hold=10, sources=sources, duration=300, **(lg_args or {}))
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


def rest_run(srv, redis, thread, messages):
    """A REST run on a new thread, running for as long as the bench runs: its worker (publish
    --run, or nobody) is registered for an hour. Returns its run id."""
    redis.cmd('FCALL', 'threadcast_register', '2', '{tc:commands}:w:' + REST_ASSISTANT, '{tc:commands}:assistants',
              REST_ASSISTANT, 'bench-worker', '3600000')
    http_json(srv, 'POST', '/threads', {'thread_id': thread})
    return http_json(srv, 'POST', f'/threads/{thread}/runs', {
        'assistant_id': REST_ASSISTANT, 'input': {'messages': messages}, 'stream_mode': list(REST_MODES)})['run_id']


def idle_viewers(tmp, redis, *, conns):
    """Idle memory per viewer of one running run, on each of threadcast's routes: REST run
    streams (GET /threads/T/runs/R/stream, the SDK's joinStream) and the protocol's WebSocket
    with the SDK's subscriptions; each on a fresh gateway, RSS after the viewers settled."""
    out = {}
    for side in ('rest', 'ws'):
        srv = Server('threadcast', tmp, redis)
        try:
            thread = f'idle{side}{time.monotonic_ns()}'
            run_id = rest_run(srv, redis, thread, [])
            time.sleep(0.5)
            before = rss_kb(srv.pid)
            if side == 'rest':
                query = '&'.join(f'stream_mode={m}' for m in REST_MODES)
                lg = loadgen(srv, thread=thread, conns=conns, expect=10**9, duration=300, hold=30,
                             **{'sse-get': f'/threads/%s/runs/{run_id}/stream?{query}', 'last-event-id': -1})
            else:
                commands = [json.dumps({'id': i + 1, 'method': 'subscription.subscribe', 'params': p})
                            for i, p in enumerate(SDK_SUBSCRIPTIONS)]
                lg = loadgen(srv, thread=thread, conns=conns, expect=10**9, duration=300, hold=30,
                             path='/threads/%s/stream/events', commands=commands)
            wait_ready(lg)
            time.sleep(6)  # settled: housekeeping has run
            after = rss_kb(srv.pid)
            lg.kill()
            lg.wait()
            out[f'{side}_kib_per_viewer'] = (after - before) / conns
        finally:
            srv.stop()
    out['viewers'] = conns
    return out


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


# The floor of any append path that validates every event as JSON and writes
# it as a stream entry of its own, in Lua on the same Redis: a call that
# decodes each of its <n> events and XADDs it, nothing else.
FLOOR_LIBRARY = """#!lua name=threadcast_bench
redis.register_function('threadcast_bench_floor', function(keys, args)
  for i = 2, tonumber(args[1]) + 1 do
    if type(cjson.decode(args[i])) ~= 'table' then return redis.error_reply('not an object') end
    redis.call('XADD', keys[1], '*', 'm', 'tasks', 'n', '', 'e', args[i])
  end
  return 1
end)
"""


def append_path(kind, tmp, redis, *, events):
    """The producer contract alone: Redis CPU per appended event, single
    (threadcast_append) and batched by 16 (threadcast_append_batch), beside a
    plain pipelined XADD of the same payload and the floor function (decode
    and XADD each event, one call per event or per 16) in the same run. No
    subscriber."""
    srv = Server(kind, tmp, redis)  # loads the function library
    try:
        out = {}
        loaded = redis.cmd('FUNCTION', 'LOAD', 'REPLACE', FLOOR_LIBRARY).strip()
        if loaded != 'threadcast_bench':
            raise RuntimeError(f'loading the floor function: {loaded}')
        floor = {'floor': 'threadcast_bench_floor'}
        for name, extra in (('xadd', {'xadd': 1}), ('floor1', floor), ('floor16', {**floor, 'batch': 16}),
                            ('single', {}), ('batch16', {'batch': 16})):
            thread = f'append-{name}-{time.monotonic_ns()}'
            c0 = cpu_ticks(redis.proc.pid)
            r = publish(srv, redis, threads=thread, count=events, rate=0, size=200, **extra)
            cpu = (cpu_ticks(redis.proc.pid) - c0) / TICK
            out[f'{name}_per_core'] = events / max(cpu, 1e-9)
            out[f'{name}_per_s'] = r['rate']
            redis.cmd('DEL', f'tc:{{{thread}}}:events', f'tc:{{{thread}}}:plain', f'tc:{{{thread}}}:floor')
        for name in ('single', 'batch16', 'floor1', 'floor16'):
            out[f'{name}_vs_xadd'] = out[f'{name}_per_core'] / out['xadd_per_core']
        out['single_vs_floor1'] = out['single_per_core'] / out['floor1_per_core']
        out['batch16_vs_floor16'] = out['batch16_per_core'] / out['floor16_per_core']
        return out
    finally:
        srv.stop()


# The official SDK's subscriptions (@langchain/langgraph-sdk 1.15, ThreadStream): thread.messages,
# thread.values, its lifecycle tracking, and the root pump of useStream, on one WebSocket.
SDK_SUBSCRIPTIONS = [
    {'channels': ['messages', 'lifecycle', 'input']},
    {'channels': ['values', 'lifecycle', 'input']},
    {'channels': ['lifecycle', 'input']},
    {'channels': ['values', 'checkpoints', 'lifecycle', 'input', 'messages', 'tools'], 'namespaces': [[]], 'depth': 1},
]
# A token stream's mix: mostly messages, some tools and values. Each event
# matches at least one subscription, so each reaches each connection once.
SDK_METHODS = 'messages,messages,messages,tools,values'


def sdk(kind, tmp, redis, *, conns, threads, count, rate):
    """The SDK's access pattern: 4 subscriptions per WebSocket on the 0.0.21 route, snake_case frames."""
    commands = [json.dumps({'id': i + 1, 'method': 'subscription.subscribe', 'params': p})
                for i, p in enumerate(SDK_SUBSCRIPTIONS)]
    r = delivery(kind, tmp, redis, conns=conns, threads=threads, count=count, rate=rate, size=200,
                 lg_args={'path': '/threads/%s/stream/events', 'commands': commands},
                 pub_args={'methods': SDK_METHODS, 'spelling': '0.0.21'})
    r['subscriptions_per_conn'] = len(commands)
    if kind == 'threadcast' and r['replies'] != conns * len(commands):
        raise RuntimeError(f"{r['replies']} of {conns * len(commands)} subscribes answered, {r['errors']} refused")
    return r


def deflate(kind, tmp, redis, *, conns, threads, count, rate):
    """The token mix with and without permessage-deflate, side by side: wire bytes and CPU per event."""
    kw = dict(conns=conns, threads=threads, count=count, rate=rate, size=60, pub_args={'tokens': 1})
    plain = delivery(kind, tmp, redis, lg_args={'channels': 'messages', 'deflate': 0}, **kw)
    r = delivery(kind, tmp, redis, lg_args={'channels': 'messages', 'deflate': 1}, **kw)
    r['plain_wire_bytes_per_event'] = plain['wire_bytes_per_event']
    r['plain_us_per_event'] = plain.get('us_per_event')
    r['plain_user_us_per_event'] = plain.get('user_us_per_event')
    r['plain_sys_us_per_event'] = plain.get('sys_us_per_event')
    r['wire_vs_plain'] = r['wire_bytes_per_event'] / max(1e-9, plain['wire_bytes_per_event'])
    if plain.get('us_per_event'):
        r['us_per_event_vs_plain'] = r['us_per_event'] / plain['us_per_event']
    return r


def idle_deflate(kind, tmp, redis, *, conns):
    """Idle memory with permessage-deflate negotiated (each subscribe sent compressed), beside without."""
    plain = idle_memory(kind, tmp, redis, conns=conns)
    r = idle_memory(kind, tmp, redis, conns=conns, lg_args={'deflate': 1})
    r['plain_kib_per_conn'] = plain['kib_per_conn']
    return r


# The stream modes a REST viewer asks for (the SDK's usual ones), and the
# assistant the rest scenario's runs are for (registered by the bench: its
# worker is publish --run).
REST_MODES = ('values', 'messages-tuple', 'updates')
REST_ASSISTANT = 'bench'


def rest_units(kinds):
    """The SSE units a run stream in REST_MODES makes of a publish --run run
    (src/run/modes.c): its metadata, each text delta, each tool call chunk (a
    tool call block's start and deltas), each tool's result (a ToolMessage),
    each updates and values event. Message starts and finishes, a text block's
    start and finish, tool-started, checkpoints and lifecycle make none."""
    return (1 + kinds['messages/content-block-delta/text-delta'] + kinds['messages/content-block-start/tool_call_chunk']
            + kinds['messages/content-block-delta/tool_call_chunk'] + kinds['tools/tool-finished']
            + kinds['updates'] + kinds['values'])


def http_json(srv, method, path, body=None):
    req = urllib.request.Request(f'http://127.0.0.1:{srv.port}{path}', method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={'content-type': 'application/json'})
    with urllib.request.urlopen(req, timeout=10) as res:
        return json.loads(res.read() or b'null')


def gateway_metrics(srv):
    """threadcast's /metrics counters and gauges by name (labels included); {} when unanswered."""
    try:
        with urllib.request.urlopen(f'http://127.0.0.1:{srv.port}/metrics', timeout=5) as res:
            text = res.read().decode()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        name, _, value = line.rpartition(' ')
        if name and not line.startswith('#'):
            try:
                out[name] = float(value)
            except ValueError:
                pass
    return out


def rest_side(side, tmp, redis, *, viewers, count, rate):
    """One side of the rest scenario on a fresh gateway: a REST run (runs.create) watched by
    `viewers` REST run streams ('rest') or SDK WebSockets ('ws'), all attached before publish
    --run appends its events; server CPU over the run only, per delivered unit."""
    srv = Server('threadcast', tmp, redis)
    try:
        thread = f'{side}{time.monotonic_ns()}'
        run_id = rest_run(srv, redis, thread, [{'role': 'user', 'content': 'How do sea otters use tools?'}])
        plan = publish(srv, redis, threads=thread, run=run_id, count=count, **{'dry-run': 1})
        events, kinds = plan['events'], plan['kinds']
        hold = events / rate + 120  # the run's length and a margin: a viewer that never completes fails the run
        if side == 'rest':
            expect = rest_units(kinds)
            query = '&'.join(f'stream_mode={m}' for m in REST_MODES)
            lg = loadgen(srv, thread=thread, conns=viewers, expect=expect, duration=60, hold=hold,
                         **{'sse-get': f'/threads/%s/runs/{run_id}/stream?{query}', 'last-event-id': -1})
        else:
            expect = events - kinds['updates']  # no SDK subscription has updates
            commands = [json.dumps({'id': i + 1, 'method': 'subscription.subscribe', 'params': p})
                        for i, p in enumerate(SDK_SUBSCRIPTIONS)]
            lg = loadgen(srv, thread=thread, conns=viewers, expect=expect, gaps=1, duration=60, hold=hold,
                         path='/threads/%s/stream/events', commands=commands)
        wait_ready(lg)
        time.sleep(1.0)  # subscribes answered, the feed's or the subscriptions' Redis subscription made
        m0 = gateway_metrics(srv)
        cpu = CpuWindow(srv, redis).start()
        pub = publish(srv, redis, threads=thread, run=run_id, rest=1, count=count, rate=rate)
        r = result(lg)
        r.update(cpu.stop())
        m1 = gateway_metrics(srv)
        # REST streams got their metadata unit when they attached, before the window.
        delivered = r['received'] - (viewers if side == 'rest' else 0)
        n = max(1, delivered)
        out = {'viewers': viewers, 'events': events, 'delivered': delivered, 'expected_per_viewer': expect,
               'server_cpu_s': r['server_cpu_s'], 'server_user_s': r['server_user_s'], 'server_sys_s': r['server_sys_s'],
               'redis_cpu_s': r['redis_cpu_s'],
               'us_per_delivered': r['server_cpu_s'] * 1e6 / n, 'user_us_per_delivered': r['server_user_s'] * 1e6 / n,
               'sys_us_per_delivered': r['server_sys_s'] * 1e6 / n,
               'us_per_event_viewer': r['server_cpu_s'] * 1e6 / (events * viewers),
               'wire_bytes': r['wire_bytes'], 'wire_bytes_per_delivered': r['wire_bytes'] / n,
               'latency_p50_ms': r['latency_us']['p50'] / 1000, 'latency_p99_ms': r['latency_us']['p99'] / 1000,
               'latency_samples': r['latency_us']['samples'], 'published_rate': pub['rate'],
               'lost': r['missing'] + r['duplicates']}
        if 'threadcast_bytes_out_total' in m1:
            out['bytes_out'] = m1['threadcast_bytes_out_total'] - m0.get('threadcast_bytes_out_total', 0)
        if 'threadcast_run_events_translated_total' in m1:  # (feeds' builds only)
            out['events_translated'] = (m1['threadcast_run_events_translated_total']
                                        - m0.get('threadcast_run_events_translated_total', 0))
        # Every viewer got every unit once, in order, and nothing else went wrong.
        wrong = []
        if pub['kinds'] != kinds:
            wrong.append('the run published is not the one planned')
        if r['connected'] != viewers or r['failed']:
            wrong.append(f"{r['connected']} of {viewers} viewers attached, {r['failed']} failed")
        if (r['min_received'], r['max_received']) != (expect, expect) or r['complete'] != viewers:
            wrong.append(f"viewers got {r['min_received']} to {r['max_received']} units of {expect}, "
                         f"{r['complete']} complete")
        if r['missing'] or r['duplicates'] or r['errors']:
            wrong.append(f"{r['missing']} missing, {r['duplicates']} duplicated or out of order, {r['errors']} errors")
        if side == 'ws' and r['replies'] != viewers * len(SDK_SUBSCRIPTIONS):
            wrong.append(f"{r['replies']} of {viewers * len(SDK_SUBSCRIPTIONS)} subscribes answered")
        if side == 'rest' and r['ended'] != viewers:
            wrong.append(f"{r['ended']} of {viewers} streams ended with the run")
        if wrong:
            raise RuntimeError(f'{side}: ' + '; '.join(wrong))
        return out
    finally:
        srv.stop()


def rest_vs_ws(tmp, redis, *, viewers, count, rate, rest_first):
    """The rest scenario's run: both sides, one after the other, with the same run; REST / WebSocket."""
    order = ('rest', 'ws') if rest_first else ('ws', 'rest')
    sides = {side: rest_side(side, tmp, redis, viewers=viewers, count=count, rate=rate) for side in order}
    r = {'first': order[0]}
    for side, res in sides.items():
        r.update({f'{side}_{k}': v for k, v in res.items()})
    for key in ('us_per_delivered', 'user_us_per_delivered', 'sys_us_per_delivered', 'us_per_event_viewer',
                'wire_bytes_per_delivered', 'bytes_out'):
        if sides['ws'].get(key):
            r[f'rest_vs_ws_{key}'] = sides['rest'].get(key, 0) / sides['ws'][key]
    return r


# The tokens scenario (issue 29): LangGraph's own Agent Server as the peer.
AGENT_SERVER = os.path.join(ROOT, 'tests/bench/agent-server')
TOKEN_GRAPH = os.path.join(AGENT_SERVER, 'graph.mjs')
WORKER_BIN = os.path.join(ROOT, 'src/worker/bin/threadcast-worker.js')
# The tokens-py scenario (issue 37): the same in Python, LangGraph's Python server as the peer.
# Both serve the project in tests/bench/agent-server-py/ (graph.py, graph.mjs's twin); the
# worker and the server come from the venv scripts/lib.sh's `tc_python_env dev` makes.
PY_SERVER = os.path.join(ROOT, 'tests/bench/agent-server-py')
PY_VENV = os.environ.get('TC_BENCH_PY_VENV') or os.path.join(ROOT, 'build-py/venv-dev')
# Bench-only profiling of the measured windows (never on in the figures): TC_BENCH_PROFILE=DIR
# runs the Python processes (threadcast's Python worker, LangGraph's Python server) under
# cProfile (tests/bench/agent-server-py/profiled.py), on only inside each cell's window, one
# .pstats file a cell and process; TC_BENCH_PERF=DIR records every server process with
# `perf record -g` over each cell's window.
PROFILE_DIR = os.environ.get('TC_BENCH_PROFILE')
PERF_DIR = os.environ.get('TC_BENCH_PERF')
# The peer of each tokens scenario: the process that is its whole server side.
TOKEN_PEERS = {'tokens': 'agent-server', 'tokens-py': 'agent-server-py'}


def percentile(xs, q):
    """The q-th percentile (0-100) of xs by nearest rank; None when empty."""
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, int(round(q / 100 * len(xs) + 0.5)) - 1))]


class TokenStack:
    """The server side of one system in the tokens scenarios, all of it pinned to SERVER_CPU (one
    core): threadcast is three processes there (redis-server, the gateway, the LangGraph worker
    serving tests/bench/agent-server/graph.mjs, or with lang 'python' the Python worker serving
    tests/bench/agent-server-py/), the Agent Server one (its in-memory dev server, running up to
    `jobs` runs at once), LangGraph's Python server one too (agent-server-py: `langgraph dev`,
    the same). CPU and RSS are read per process."""

    def __init__(self, kind, tmp, jobs, lang='js'):
        self.kind, self.procs, self.logs, self.profiled, self.perf = kind, {}, [], [], []
        d = tempfile.mkdtemp(dir=tmp, prefix=f'{kind}.')
        pin = ['taskset', '-c', SERVER_CPU]
        try:
            self.port = free_port()
            if kind == 'threadcast':
                rport = free_port()
                self.start('redis', pin + ['redis-server', '--port', str(rport), '--bind', '127.0.0.1', '--save', '',
                                           '--appendonly', 'no', '--dir', d, '--loglevel', 'warning'], d)
                wait_port(rport, self.procs['redis'])
                url = f'redis://127.0.0.1:{rport}'
                self.start('gateway', pin + [THREADCAST, '--port', str(self.port), '--host', '127.0.0.1',
                                             '--redis-url', url, '--log-level', 'warn', '--max-connections', '200000',
                                             '--max-queue-bytes', str(64 << 20)], d, env={'THREADCAST_AUTH': 'off'})
                wait_port(self.port, self.procs['gateway'])
                if lang == 'python':
                    self.profiled.append('worker')
                    log = self.start('worker', pin + self.python('threadcast-worker-python') + [
                        '--redis-url', url, '--config', os.path.join(PY_SERVER, 'langgraph.json'), '--name', 'bench'],
                        d, env={'LANGSMITH_TRACING': 'false'})
                else:
                    log = self.start('worker', pin + ['node', WORKER_BIN, '--redis-url', url, '--graphs', TOKEN_GRAPH,
                                                      '--name', 'bench'], d)
                end = time.time() + 60
                while 'worker ready' not in open(log).read():
                    if self.procs['worker'].poll() is not None or time.time() > end:
                        raise RuntimeError(f'the worker did not start: {open(log).read()[-500:]}')
                    time.sleep(0.1)
            elif kind == 'agent-server-py':
                self.start_python_server(pin, d, jobs)
            else:
                self.start('agent-server', pin + ['node', os.path.join(AGENT_SERVER, 'server.mjs'), '--port',
                                                  str(self.port), '--jobs', str(jobs), '--cwd', d], d, cwd=AGENT_SERVER)
                wait_port(self.port, self.procs['agent-server'], timeout=60)
            self.api = f'http://127.0.0.1:{self.port}'
        except BaseException:
            self.stop()
            raise

    def python(self, script):
        """The argv of one of the venv's console scripts, under cProfile when TC_BENCH_PROFILE is set."""
        path = os.path.join(PY_VENV, 'bin', script)
        if not os.path.exists(path):
            raise RuntimeError(f'{path}: no such program (scripts/lib.sh: tc_python_env dev makes the venv)')
        if not PROFILE_DIR:
            return [path]
        return [os.path.join(PY_VENV, 'bin', 'python'), os.path.join(PY_SERVER, 'profiled.py'), PROFILE_DIR, path]

    def start_python_server(self, pin, d, jobs):
        """LangGraph's Python server as `langgraph dev` runs it (langgraph-cli[inmem]: uvicorn serving
        langgraph_api.server:app in this one process, the in-memory runtime), without its reloader,
        on a copy of the bench project (it keeps its state in .langgraph_api/ beside the project
        file), running up to `jobs` runs at once (its --n-jobs-per-worker; left out, it runs one)."""
        project = os.path.join(d, 'project')
        shutil.copytree(PY_SERVER, project, ignore=shutil.ignore_patterns('__pycache__', '.langgraph_api'))
        self.profiled.append('agent-server-py')
        # LOG_LEVEL: its default, INFO, logs every request (as the Agent Server's debug does).
        log = self.start('agent-server-py', pin + self.python('langgraph') + [
            'dev', '--no-browser', '--no-reload', '--port', str(self.port), '--n-jobs-per-worker', str(jobs),
            '--config', 'langgraph.json'], d, cwd=project,
            env={'LANGSMITH_TRACING': 'false', 'LANGGRAPH_NO_VERSION_CHECK': 'true', 'LOG_LEVEL': 'WARNING'})
        end = time.time() + 120
        while True:
            # It takes another port than asked when that one is busy: its log's "API:" line says which.
            found = re.search(r'API:\s*(?:\x1b\[[0-9;]*m)*http://127\.0\.0\.1:(\d+)', open(log, errors='replace').read())
            if found:
                self.port = int(found.group(1))
                try:
                    with urllib.request.urlopen(f'http://127.0.0.1:{self.port}/ok', timeout=2) as res:
                        if res.status == 200:
                            return
                except OSError:
                    pass
            if self.procs['agent-server-py'].poll() is not None or time.time() > end:
                raise RuntimeError(f'langgraph dev did not start: {open(log, errors="replace").read()[-800:]}')
            time.sleep(0.2)

    def start(self, name, argv, d, env=None, cwd=None):
        log = os.path.join(d, f'{name}.log')
        self.procs[name] = subprocess.Popen(argv, env=dict(os.environ, **(env or {})), cwd=cwd,
                                            stdout=subprocess.DEVNULL, stderr=open(log, 'a'))
        return log

    def cpu(self):
        return {name: cpu_split(p.pid) for name, p in self.procs.items()}

    def runq_wait(self):
        """Seconds the stack's threads have waited, runnable, for a core (schedstat)."""
        return sum(runq_wait_s(p.pid) for p in self.procs.values())

    def profile_start(self, label):
        """TC_BENCH_PROFILE, TC_BENCH_PERF: profiles of the window that starts now, named by label."""
        self.perf = []
        label = label.replace('/', '-')
        if PROFILE_DIR and self.profiled:
            os.makedirs(PROFILE_DIR, exist_ok=True)
            with open(os.path.join(PROFILE_DIR, 'label'), 'w') as f:
                f.write(f'{self.kind}-{label}')
            for name in self.profiled:
                self.procs[name].send_signal(signal.SIGUSR1)
        if PERF_DIR:
            os.makedirs(PERF_DIR, exist_ok=True)
            for name, p in self.procs.items():
                out = os.path.join(PERF_DIR, f'{self.kind}-{label}.{name}.data')
                self.perf.append(subprocess.Popen(
                    ['taskset', '-c', CLIENT_CPU, 'perf', 'record', '-q', '-g', '-F', '999', '-o', out, '-p', str(p.pid)],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            time.sleep(0.5)  # attached

    def profile_stop(self):
        if PROFILE_DIR and self.profiled:
            for name in self.profiled:
                self.procs[name].send_signal(signal.SIGUSR2)
        for p in self.perf:
            p.send_signal(signal.SIGINT)
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.perf = []

    def rss(self):
        return {name: rss_kb(p.pid) for name, p in self.procs.items()}

    def stop(self):
        for p in reversed(list(self.procs.values())):  # by PID, the worker before its Redis
            if p.poll() is None:
                p.kill()
            p.wait()


def parse_cell(text):
    """'10x10@20/rest+late': runs x viewers @ pace ms / route (rest, websocket), + a late joiner per run."""
    shape, _, route = text.partition('/')
    runs_views, _, pace = shape.partition('@')
    runs, _, viewers = runs_views.partition('x')
    route, _, extra = route.partition('+')
    if route not in ('rest', 'websocket', 'sse') or extra not in ('', 'late'):
        raise ValueError(f'bad tokens cell {text!r}')
    return {'name': text, 'runs': int(runs), 'viewers': int(viewers), 'pace': int(pace), 'route': route,
            'late': extra == 'late'}


def client_proc(spec):
    return subprocess.Popen(['taskset', '-c', CLIENT_CPU, 'node', os.path.join(AGENT_SERVER, 'clients.mjs'),
                             json.dumps(spec)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def read_json_line(proc, key, timeout):
    """The next stdout line of proc that is a JSON object with key (a thread bounds the wait)."""
    box = []

    def read():
        for line in proc.stdout:
            try:
                msg = json.loads(line) if line.startswith('{') else {}
            except ValueError:
                msg = {}
            if key in msg:
                box.append(msg)
                return
    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(timeout)
    if not box:
        raise RuntimeError(f'a client printed no {key!r} in {timeout} s')
    return box[0]


def token_cell(stack, cell, *, tokens, clients, label=None):
    """One cell: its runs spread over `clients` client processes (pinned to CLIENT_CPU), every
    run started at once; per token, emission (its stamp) to receipt; CPU per process. label:
    the name of the window's profiles (TC_BENCH_PROFILE, TC_BENCH_PERF), when profiled."""
    nproc = max(1, min(clients, cell['runs']))
    share = [cell['runs'] // nproc + (1 if i < cell['runs'] % nproc else 0) for i in range(nproc)]
    deadline = cell['pace'] * tokens / 1000 + 60 + cell['runs'] * cell['viewers'] / 50
    procs = [client_proc({'api': stack.api, 'runs': n, 'viewers': cell['viewers'], 'tokens': tokens,
                          'pace': cell['pace'], 'route': cell['route'], 'late': cell['late'], 'deadline_s': deadline})
             for n in share]
    try:
        for p in procs:
            read_json_line(p, 'ready', 120)
        time.sleep(0.5)
        if label:
            stack.profile_start(label)
        w0, c0, k0, t0 = stack.runq_wait(), stack.cpu(), [cpu_split(p.pid) for p in procs], time.time()
        for p in procs:
            p.stdin.write('go\n')
            p.stdin.flush()
        res = [read_json_line(p, 'result', deadline + 30)['result'] for p in procs]
        wall = time.time() - t0
        c1, k1, w1 = stack.cpu(), [cpu_split(p.pid) for p in procs], stack.runq_wait()
        loadavg = os.getloadavg()[0]
        if label:
            stack.profile_stop()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
    cat = lambda key: [x for r in res for x in r[key]]
    starter, viewer, ttft, catchup, gen = (cat('starter_us'), cat('viewer_us'), cat('ttft_us'), cat('catchup_us'),
                                           cat('gen_us'))
    received = sum(r['received'] for r in res)
    streams = sum(r['streams'] for r in res)
    out = {'runs': cell['runs'], 'viewers': cell['viewers'], 'pace_ms': cell['pace'], 'route': cell['route'],
           'tokens': tokens, 'clients': nproc, 'streams': streams, 'received': received,
           'expected': streams * tokens, 'lost': sum(r['missing'] + r['duplicates'] for r in res),
           'missing': sum(r['missing'] for r in res), 'duplicates': sum(r['duplicates'] for r in res),
           'complete': sum(r['complete'] for r in res), 'errors': [e for r in res for e in r['errors']][:5],
           'seconds': wall}
    out['tokens_per_s'] = received / max(1e-9, wall)
    # How busy the machine was: its load average as the cell ended, and how long the server
    # side's processes waited, runnable, for their core (other tenants, or each other) over it.
    out['loadavg'] = loadavg
    out['server_runq_wait_ms'] = (w1 - w0) * 1000
    out['server_runq_wait_share'] = (w1 - w0) / max(1e-9, wall)
    for name, xs in (('starter', starter), ('viewer', viewer), ('ttft', ttft), ('catchup', catchup), ('gen', gen)):
        if xs:
            out[f'{name}_p50_ms'] = percentile(xs, 50) / 1000
            out[f'{name}_p99_ms'] = percentile(xs, 99) / 1000
            out[f'{name}_max_ms'] = max(xs) / 1000
    total = 0
    for name in c0:
        s = (sum(c1[name]) - sum(c0[name])) / TICK
        total += s
        out[f'{name}_us_per_token'] = s * 1e6 / max(1, received)
    out['server_us_per_token'] = total * 1e6 / max(1, received)
    spent = [(sum(b) - sum(a)) / TICK for a, b in zip(k0, k1)]
    out['client_us_per_token'] = sum(spent) * 1e6 / max(1, received)  # the SDK's own cost
    load = [x / max(1e-9, wall) for x in spent]
    out['client_cpu'] = [round(x, 3) for x in load]  # each client process's share of a core over the cell
    out['client_cpu_max'] = max(load)
    out['client_cpu_total'] = sum(load)
    return out


def token_idle(stack, route, viewers):
    """Idle memory per viewer of one running run on a route: RSS of the process holding the
    viewers' connections (threadcast's gateway; the Agent Server; the Python server) after they
    attached, less before."""
    holder = 'gateway' if stack.kind == 'threadcast' else stack.kind
    p = client_proc({'api': stack.api, 'idle': viewers, 'route': route, 'tokens': 10, 'pace': 60000,
                     'runs': 0, 'viewers': 0,
                     # its joins get nothing before the run's next token: attached once answered
                     **({'attach': 'response'} if stack.kind == 'agent-server-py' else {})})
    try:
        read_json_line(p, 'started', 60)
        time.sleep(2)
        before = stack.rss()[holder]
        p.stdin.write('go\n')
        p.stdin.flush()
        read_json_line(p, 'ready', 120)
        time.sleep(6)  # settled: housekeeping has run
        after = stack.rss()[holder]
        p.stdin.write('stop\n')
        p.stdin.flush()
    finally:
        if p.poll() is None:
            time.sleep(0.5)
            p.kill()
        p.wait()
    return (after - before) / viewers


def tokens_scenario(kind, tmp, *, cells, tokens, clients, idle, warmup=None, lang='js', run=None):
    """The tokens scenario for one system: every cell in turn on one server stack (fresh per
    bench run), after the warm-up cell (not reported: a server is measured as it runs for its
    users, its code compiled and its pools grown, not on its first runs), then idle memory per
    viewer on each of its routes (a fresh stack each). lang 'python': the tokens-py scenario
    (threadcast with its Python worker, or LangGraph's Python server). run: the bench run's
    number, in the profiles' names."""
    name = 'tokens-py' if lang == 'python' else 'tokens'
    jobs = max(c['runs'] for c in cells + ([warmup] if warmup else []))
    out = {}
    stack = TokenStack(kind, tmp, jobs, lang)
    try:
        if warmup:
            try:
                r = token_cell(stack, warmup, tokens=tokens, clients=clients)
                print(f'{name} {kind} warm-up {warmup["name"]}: {r["received"]} of {r["expected"]} tokens, '
                      f'{r["server_us_per_token"]:.0f} µs a token', file=sys.stderr, flush=True)
            except Exception as e:  # reported; the cells still run (cold, as the error says)
                out['warm-up error'] = str(e)
                print(f'{name} {kind} warm-up {warmup["name"]} failed: {e}', file=sys.stderr, flush=True)
        for cell in cells:
            if kind != 'threadcast' and cell['route'] != 'rest':
                continue  # the Agent Server's protocol routes carry no runs.stream run's tokens
            try:
                label = f'{cell["name"]}-run{run}' if run is not None else cell['name']
                r = token_cell(stack, cell, tokens=tokens, clients=clients,
                               label=label if PROFILE_DIR or PERF_DIR else None)
            except Exception as e:  # a failed cell is reported, the others still run
                r = {'error': str(e)}
            print(f'{name} {kind} {cell["name"]}: {json.dumps(r)}', file=sys.stderr, flush=True)
            out.update({f'{cell["name"]} {k}': v for k, v in r.items()})
    finally:
        stack.stop()
    if idle:
        for route in (('rest', 'websocket') if kind == 'threadcast' else ('rest', 'sse')):
            stack = TokenStack(kind, tmp, 2, lang)
            try:
                out[f'idle {route} kib_per_viewer'] = token_idle(stack, route, idle)
            except Exception as e:
                out[f'idle {route} error'] = str(e)
            finally:
                stack.stop()
    return out


def netns_prefix():
    """How to run a command in a fresh network namespace here, or None."""
    for prefix in (['unshare', '-n'], ['unshare', '-rn']):
        try:
            if subprocess.run(prefix + ['true'], capture_output=True, timeout=10).returncode == 0:
                return prefix
        except (OSError, subprocess.TimeoutExpired):
            pass
    return None


def storm_conns(cap):
    """The fd limit's worth of clients: what RLIMIT_NOFILE leaves the load generator and the
    server (each holds one descriptor per connection, plus ~100 of its own), at most cap."""
    return max(1, min(cap, resource.getrlimit(resource.RLIMIT_NOFILE)[0] - 100))


def storm(kind, tmp, redis, *, conns, netns):
    """A reconnect storm: conns clients connect at once. Runs in a child process, in a fresh
    network namespace when netns (somaxconn raised there: with the root namespace's 4096 the
    kernel's SYN retransmit backoff, not the server, sets the time), with its own Redis."""
    argv = [sys.executable, os.path.abspath(__file__), '--storm-child', kind, '--storm-conns', str(conns)]
    env = dict(os.environ, TC_STORM_NETNS='1' if netns else '0')
    out = subprocess.run((netns or []) + argv, capture_output=True, text=True, timeout=300, env=env)
    lines = [l for l in out.stdout.splitlines() if l.startswith('{')]
    if out.returncode or not lines:
        raise RuntimeError(f'storm child failed ({out.returncode}): {out.stderr[-500:]}')
    return json.loads(lines[-1])


def storm_child(kind, conns):
    netns = os.environ.get('TC_STORM_NETNS') == '1'
    somaxconn = int(open('/proc/sys/net/core/somaxconn').read())
    if netns:
        subprocess.run(['ip', 'link', 'set', 'lo', 'up'], check=True)
        for key in ('net/core/somaxconn', 'net/ipv4/tcp_max_syn_backlog'):
            with open(f'/proc/sys/{key}', 'w') as f:
                f.write('65535')
        somaxconn = int(open('/proc/sys/net/core/somaxconn').read())
    tmp = tempfile.mkdtemp(prefix='threadcast-storm.')
    redis = srv = lg = None
    try:
        redis = Redis(tmp)
        srv = Server(kind, tmp, redis)
        # Fresh source addresses (~28,000 ephemeral ports each): the last run's sockets may linger.
        sources = ','.join(f'127.0.{1 + (n // 250) % 250}.{2 + n % 250}' for n in (next(SOURCE) for _ in range(3)))
        cpu = CpuWindow(srv, redis).start()
        t0 = time.time()
        lg = loadgen(srv, thread=f'storm{time.monotonic_ns()}', conns=conns, subscribe=0, hold=0.5,
                     duration=120, sources=sources)
        wait_ready(lg)  # every connection upgraded or failed (or --duration passed)
        wall = time.time() - t0
        r = cpu.stop()
        out = result(lg)
        lg = None
        r.update({'conns': conns, 'upgraded': out['connected'], 'failed': out['failed'],
                  'storm_seconds': out['connect_seconds'] if out['connected'] == conns else None,
                  'settle_seconds': wall, 'netns': netns, 'somaxconn': somaxconn,
                  'storm_cpu_s': r['server_cpu_s'], 'storm_user_s': r['server_user_s'],
                  'storm_sys_s': r['server_sys_s'],
                  'connects_per_s': out['connected'] / max(1e-9, out['connect_seconds'])
                  if out['connected'] == conns else None})
        print(json.dumps(r), flush=True)
    finally:
        if lg:
            lg.kill()
            lg.wait()
        if srv:
            srv.stop()
        if redis:
            redis.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


# The CPU figures every system's run is divided by the blaster's (same run).
CPU_KEYS = ['us_per_event', 'user_us_per_event', 'sys_us_per_event', 'total_us_per_event',
            'storm_cpu_s', 'storm_user_s', 'storm_sys_s']
FANOUT = ('a', 'a-full', 'a10k', 'b', 'b1', 'e')
SCENARIOS = ('a', 'a-full', 'a10k', 'b', 'b1', 'c', 'c50k', 'd', 'append', 'e', 'sdk', 'storm', 'deflate', 'c-deflate',
             'rest', 'c-viewers', 'tokens', 'tokens-py')
# The tokens scenario's cells: 10 concurrent runs with 1 and 10 viewers each, at 20 ms a token and
# at full speed, on REST run streams and on the WebSocket route; 3 runs x 10 viewers at 20 ms, the
# latency at ten viewers a run with the clients' core a third busy (at 10 x 10 the SDK clients
# saturate it: ~250 µs of client CPU a received token); 50 runs x 10 viewers with a late joiner per run.
TOKEN_CELLS = ('10x1@20/rest', '10x10@20/rest', '3x10@20/rest', '10x1@0/rest', '10x10@0/rest', '10x1@20/websocket',
               '10x10@20/websocket', '3x10@20/websocket', '10x1@0/websocket', '10x10@0/websocket',
               '50x10@20/rest+late')
# The tokens-py scenario's cells (issue 37's targets are at 200 tokens a run, 20 ms a token and
# full speed, ten viewers a run): 10 runs x 10 viewers at 20 ms and at full speed, 10 x 1 at
# 20 ms (the latency with the clients' core little busy), and 3 x 10 at 20 ms (ten viewers a run
# with the clients' core a third busy, as in the tokens scenario). REST only: the Python server's
# protocol routes carry no runs.stream run's tokens either.
PY_TOKEN_CELLS = ('10x10@20/rest', '10x10@0/rest', '10x1@20/rest', '3x10@20/rest')


def main():
    ap = argparse.ArgumentParser(description='threadcast beside its peers and the blaster control; '
                                 'scenarios: ' + ' '.join(SCENARIOS))
    ap.add_argument('--runs', type=int, default=3)
    ap.add_argument('--only', default='a,a-full,a10k,b,b1,c,c-deflate,c-viewers,d,e,deflate,append,sdk,rest,storm,tokens,'
                    'tokens-py')
    ap.add_argument('--systems', default='threadcast,nchan,node',
                    help='the blaster is added to every fan-out scenario, sdk and storm')
    ap.add_argument('--quick', action='store_true', help='smaller counts, one run')
    ap.add_argument('--storm-max', type=int, default=19000,
                    help='the storm: at most this many clients (else what ulimit -n allows)')
    ap.add_argument('--sdk-conns', type=int, default=1000)
    ap.add_argument('--sdk-threads', type=int, default=1)
    ap.add_argument('--sdk-rate', type=int, default=100, help='events/s over all threads')
    ap.add_argument('--rest-viewers', type=int, default=100,
                    help='rest: REST viewers, and WebSocket subscribers, of the run')
    ap.add_argument('--rest-events', type=int, default=5000, help='rest: events in the run (rounded up to whole turns)')
    ap.add_argument('--rest-rate', type=int, default=250, help='rest: the run\'s events per second')
    ap.add_argument('--tokens-cells', default=','.join(TOKEN_CELLS),
                    help='tokens: the cells, RUNSxVIEWERS@PACE_MS/ROUTE[+late] (route rest or websocket; +late: one '
                    'more viewer per run joins halfway, its catch-up is measured)')
    ap.add_argument('--tokens-py-cells', default=','.join(PY_TOKEN_CELLS),
                    help='tokens-py (threadcast with its Python worker beside LangGraph\'s Python server, on '
                    'tests/bench/agent-server-py/): its cells, as --tokens-cells; --tokens, --tokens-clients, '
                    '--tokens-warmup and --tokens-idle are shared with tokens')
    ap.add_argument('--tokens', type=int, default=200, help='tokens: tokens a run')
    ap.add_argument('--tokens-clients', type=int, default=4, help='tokens: client processes a cell is spread over')
    ap.add_argument('--tokens-warmup', default='10x10@0/rest',
                    help='tokens: the cell each server stack serves first, not reported ("": none)')
    ap.add_argument('--tokens-idle', type=int, default=1000,
                    help='tokens: idle viewers of one running run per route for the memory figure (0: none)')
    ap.add_argument('--threadcast', help='the gateway binary to measure (default: the build\'s), e.g. an older '
                    'commit\'s build, driven by this checkout\'s tools')
    ap.add_argument('--out', default=os.path.join(ROOT, 'bench-results'))
    ap.add_argument('--storm-child', help=argparse.SUPPRESS)
    ap.add_argument('--storm-conns', type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.threadcast:
        global THREADCAST
        THREADCAST = os.environ['TC_BENCH_THREADCAST'] = os.path.abspath(args.threadcast)
    if args.storm_child:
        return storm_child(args.storm_child, args.storm_conns)
    if args.quick:
        args.runs = 1
    only = args.only.split(',')
    systems = args.systems.split(',')
    unknown = [n for n in only if n not in SCENARIOS]
    if unknown:
        ap.error(f'unknown scenario {",".join(unknown)}; known: {",".join(SCENARIOS)}')
    unknown = [k for k in systems if k not in ('threadcast', 'nchan', 'nchan-redis', 'node', 'blaster', 'agent-server',
                                                'agent-server-py')]
    if unknown:
        ap.error(f'unknown system {",".join(unknown)}; known: threadcast, nchan, nchan-redis, node, blaster, '
                 'agent-server, agent-server-py')
    try:
        token_cells = [parse_cell(c) for c in args.tokens_cells.split(',')]
        py_token_cells = [parse_cell(c) for c in args.tokens_py_cells.split(',')]
        token_warmup = parse_cell(args.tokens_warmup) if args.tokens_warmup else None
    except ValueError as e:
        ap.error(str(e))
    q = 0.2 if args.quick else 1.0
    tmp = tempfile.mkdtemp(prefix='threadcast-bench.')
    redis = Redis(tmp)
    netns = netns_prefix() if 'storm' in only else None
    nstorm = storm_conns(args.storm_max if not args.quick else min(args.storm_max, 2000))
    rest_runs = itertools.count()
    bench_run = {'i': 0}  # the run being measured (1, 2, …): tokens-py names its profiles by it
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
        'c-viewers': ('idle memory per viewer of a running run: 2,000 REST run streams, 2,000 SDK WebSockets',
                      lambda k: idle_viewers(tmp, redis, conns=2000)),
        'd': ('replay: one client 100,000 events behind',
              lambda k: replay(k, tmp, redis, events=int(100000 * q))),
        'append': ('append path: 200 B events appended as fast as Redis answers, no subscriber',
                   lambda k: append_path(k, tmp, redis, events=int(200000 * q))),
        'e': ('token stream: 1,000 threads x 3 subscribers, 10 tokens/s each (10,000 events/s)',
              lambda k: delivery(k, tmp, redis, conns=3000, threads=1000, count=int(100000 * q), rate=10000, size=60)),
        'deflate': ('permessage-deflate on the token mix: 1,000 threads x 3 subscribers, 10,000 one-word deltas/s',
                    lambda k: deflate(k, tmp, redis, conns=3000, threads=1000, count=int(100000 * q), rate=10000)),
        'c-deflate': ('idle memory with permessage-deflate negotiated: 10,000 idle WebSockets',
                      lambda k: idle_deflate(k, tmp, redis, conns=10000)),
        'sdk': (f'the SDK\'s access pattern: {args.sdk_threads:,} thread(s), {args.sdk_conns:,} WebSockets x '
                f'{len(SDK_SUBSCRIPTIONS)} subscriptions (0.0.21 route, snake_case), {args.sdk_rate:,} events/s',
                lambda k: sdk(k, tmp, redis, conns=args.sdk_conns, threads=args.sdk_threads,
                              count=max(args.sdk_threads, int(args.sdk_rate * 10 * q)), rate=args.sdk_rate)),
        'rest': (f'REST run streams beside WebSockets: one run of ~{int(args.rest_events * q):,} token-stream events at '
                 f'{args.rest_rate:,}/s, {args.rest_viewers:,} REST viewers ({", ".join(REST_MODES)}) vs '
                 f'{args.rest_viewers:,} WebSockets x {len(SDK_SUBSCRIPTIONS)} SDK subscriptions',
                 lambda k: rest_vs_ws(tmp, redis, viewers=args.rest_viewers, count=int(args.rest_events * q),
                                      rate=args.rest_rate, rest_first=next(rest_runs) % 2 == 0)),
        'tokens': (f'tokens: LangGraph runs of {args.tokens} stamped tokens through the SDK (runs.stream + '
                   f'joinStream, messages-tuple; ThreadStream on the WebSocket route), beside the Agent Server',
                   lambda k: tokens_scenario(k, tmp, cells=token_cells, tokens=max(10, int(args.tokens * q)), clients=args.tokens_clients,
                                             idle=args.tokens_idle,
                                             warmup=token_warmup)),
        'tokens-py': (f'tokens-py: Python LangGraph runs of {args.tokens} stamped tokens through the SDK (runs.stream + '
                      f'joinStream, messages-tuple), threadcast with its Python worker beside LangGraph\'s Python '
                      f'server (langgraph dev)',
                      lambda k: tokens_scenario(k, tmp, cells=py_token_cells, tokens=max(10, int(args.tokens * q)),
                                                clients=args.tokens_clients, idle=args.tokens_idle,
                                                warmup=token_warmup, lang='python', run=bench_run['i'])),
        'storm': (f'reconnect storm: {nstorm:,} clients connect at once'
                  + (' (in a fresh network namespace, somaxconn 65535)' if netns else
                     ' (root network namespace: no unshare here)'),
                  lambda k: storm(k, tmp, redis, conns=nstorm, netns=netns)),
    }
    results = {}
    try:
        for name in only:
            title, fn = scenarios[name]
            results[name] = {'title': title}
            if name in ('d', 'append', 'deflate', 'c-deflate'):
                kinds = [k for k in systems if k == 'threadcast']  # the peers keep no history, have no append path
            elif name in ('sdk', 'rest', 'c-viewers'):
                kinds = [k for k in systems if k == 'threadcast']  # the only one that speaks 0.0.21 and the REST API
            elif name == 'storm':
                kinds = [k for k in systems if k in ('threadcast', 'nchan')]
            elif name in TOKEN_PEERS:  # the Agent Server is its peer: --systems threadcast leaves it out
                peer = TOKEN_PEERS[name]
                kinds = [k for k in systems if k in ('threadcast', peer)]
                if peer not in kinds and args.systems == ap.get_default('systems'):
                    kinds.append(peer)
            else:
                kinds = list(systems)
            if (name in FANOUT or name in ('sdk', 'storm')) and 'blaster' not in kinds:
                kinds.append('blaster')
            for k in kinds:
                results[name][k] = []
            # Each run measures every system in turn: the ratios compare runs made side by side.
            for i in range(args.runs):
                bench_run['i'] = i + 1
                row = {}
                for kind in kinds:
                    try:
                        row[kind] = fn(kind)
                    except Exception as e:  # a failed run is reported, not hidden
                        row[kind] = {'error': str(e)}
                base = row.get('blaster', {})
                for kind, r in row.items():
                    for key in CPU_KEYS:
                        if r.get(key) is not None and base.get(key):
                            r[f'{key}_vs_blaster'] = r[key] / base[key]
                    results[name][kind].append(r)
                    print(f'{name} {kind} run {i + 1}: {json.dumps(r)}', file=sys.stderr, flush=True)
    finally:
        redis.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(args.out, exist_ok=True)
    stamp = time.strftime('%Y%m%d-%H%M%S')
    path = os.path.join(args.out, f'bench-{stamp}.json')
    json.dump(results, open(path, 'w'), indent=1)
    report({k: v for k, v in results.items() if k not in TOKEN_PEERS})
    if 'tokens' in results:
        report_tokens(results['tokens'])
    if 'tokens-py' in results:
        report_tokens(results['tokens-py'], peer='agent-server-py', paired_runs=True)
    print(f'\nresults: {path}')


METRICS = [
    ('us_per_event', 'server CPU µs / delivered event'),
    ('user_us_per_event', '  of which user space'),
    ('sys_us_per_event', '  of which kernel'),
    ('redis_us_per_event', 'Redis CPU µs / delivered event'),
    ('redis_user_us_per_event', '  of which user space'),
    ('redis_sys_us_per_event', '  of which kernel'),
    ('total_us_per_event', 'server + Redis CPU µs / delivered event'),
    ('us_per_event_vs_blaster', 'server CPU ÷ blaster (same run)'),
    ('user_us_per_event_vs_blaster', '  user space ÷ blaster'),
    ('sys_us_per_event_vs_blaster', '  kernel ÷ blaster'),
    ('total_us_per_event_vs_blaster', 'server + Redis CPU ÷ blaster'),
    ('latency_p50_ms', 'latency p50 ms'), ('latency_p99_ms', 'latency p99 ms'),
    ('lost', 'missing + duplicated'), ('bytes_per_event', 'payload bytes / delivered event'),
    ('kib_per_conn', 'RSS KiB / idle connection'),
    ('rest_kib_per_viewer', 'RSS KiB / idle REST run-stream viewer'), ('ws_kib_per_viewer', 'RSS KiB / idle SDK WebSocket'), ('plain_kib_per_conn', '  the same without deflate'),
    ('wire_bytes_per_event', 'bytes on the wire / delivered event'),
    ('plain_wire_bytes_per_event', '  the same without deflate'), ('wire_vs_plain', 'wire bytes ÷ without deflate'),
    ('plain_us_per_event', 'server CPU µs / event without deflate'),
    ('plain_user_us_per_event', '  of which user space'), ('plain_sys_us_per_event', '  of which kernel'),
    ('us_per_event_vs_plain', 'server CPU ÷ without deflate (same run)'), ('connects_per_s', 'connections set up / s'),
    ('upgraded', 'clients upgraded'), ('storm_seconds', 'seconds until all upgraded'),
    ('storm_cpu_s', 'server CPU s for the storm'), ('storm_user_s', '  of which user space'),
    ('storm_sys_s', '  of which kernel'), ('storm_cpu_s_vs_blaster', 'server CPU ÷ blaster (same run)'),
    ('events_per_s', 'replayed events / s'), ('delivered_per_s', 'delivered events / s'),
    ('xadd_per_core', 'plain XADD: events / s per Redis core'),
    ('single_per_core', 'threadcast_append: events / s per Redis core'),
    ('batch16_per_core', 'threadcast_append_batch of 16: events / s per Redis core'),
    ('floor1_per_core', 'floor (decode + XADD in Lua), 1 per call: events / s per Redis core'),
    ('floor16_per_core', 'floor, 16 per call: events / s per Redis core'),
    ('single_vs_xadd', 'threadcast_append / plain XADD (same run)'),
    ('batch16_vs_xadd', 'batch of 16 / plain XADD (same run)'),
    ('floor1_vs_xadd', 'floor, 1 per call / plain XADD'), ('floor16_vs_xadd', 'floor, 16 per call / plain XADD'),
    ('single_vs_floor1', 'threadcast_append / floor 1 per call'),
    ('batch16_vs_floor16', 'batch of 16 / floor 16 per call'),
    ('rest_us_per_delivered', 'REST: server CPU µs / delivered SSE unit'),
    ('rest_user_us_per_delivered', '  of which user space'), ('rest_sys_us_per_delivered', '  of which kernel'),
    ('ws_us_per_delivered', 'WebSocket: server CPU µs / delivered frame'),
    ('ws_user_us_per_delivered', '  of which user space'), ('ws_sys_us_per_delivered', '  of which kernel'),
    ('rest_vs_ws_us_per_delivered', 'REST ÷ WebSocket, per delivered unit (same run)'),
    ('rest_vs_ws_user_us_per_delivered', '  user space'), ('rest_vs_ws_sys_us_per_delivered', '  kernel'),
    ('rest_us_per_event_viewer', 'REST: server CPU µs / (source event x viewer)'),
    ('ws_us_per_event_viewer', 'WebSocket: server CPU µs / (source event x viewer)'),
    ('rest_vs_ws_us_per_event_viewer', 'REST ÷ WebSocket, per source event x viewer (same run)'),
    ('rest_events', 'source events in the run'), ('rest_expected_per_viewer', 'REST: units per viewer'),
    ('ws_expected_per_viewer', 'WebSocket: frames per viewer'),
    ('rest_delivered', 'REST: units delivered in the window'), ('ws_delivered', 'WebSocket: frames delivered'),
    ('rest_wire_bytes_per_delivered', 'REST: bytes received / unit'),
    ('ws_wire_bytes_per_delivered', 'WebSocket: bytes received / frame'),
    ('rest_bytes_out', 'REST: server bytes out'), ('ws_bytes_out', 'WebSocket: server bytes out'),
    ('rest_vs_ws_bytes_out', 'REST ÷ WebSocket, bytes out'),
    ('rest_events_translated', 'REST: events translated (feeds)'),
    ('rest_latency_p50_ms', 'REST: latency p50 ms (values, updates units)'), ('rest_latency_p99_ms', 'REST: latency p99 ms'),
    ('ws_latency_p50_ms', 'WebSocket: latency p50 ms (every frame)'), ('ws_latency_p99_ms', 'WebSocket: latency p99 ms'),
    ('rest_lost', 'REST: missing + duplicated'), ('ws_lost', 'WebSocket: missing + duplicated'),
    ('rest_server_cpu_s', 'REST: server CPU s'), ('ws_server_cpu_s', 'WebSocket: server CPU s'),
    ('rest_published_rate', 'run events / s published'),
]


TOKEN_METRICS = [
    ('starter_p50_ms', 'starter: token latency p50 ms'), ('starter_p99_ms', '  p99 ms'),
    ('viewer_p50_ms', 'joined viewers: token latency p50 ms'), ('viewer_p99_ms', '  p99 ms'),
    ('ttft_p50_ms', 'time to first token (starter) p50 ms'), ('ttft_p99_ms', '  p99 ms'),
    ('catchup_p50_ms', 'late joiner caught up after, p50 ms'), ('catchup_p99_ms', '  p99 ms'),
    ('catchup_max_ms', '  max ms'),
    ('gen_p50_ms', 'a run\'s tokens emitted over (first to last), p50 ms'), ('gen_max_ms', '  max ms'),
    ('tokens_per_s', 'tokens delivered / s (the cell\'s wall time)'),
    ('server_us_per_token', 'server CPU µs / delivered token'), ('gateway_us_per_token', '  gateway'),
    ('worker_us_per_token', '  worker'), ('redis_us_per_token', '  Redis'),
    ('client_cpu_max', 'busiest client process, share of a core'),
    ('client_cpu_total', 'all client processes (on one core)'), ('client_us_per_token', 'client CPU µs / received token'),
    ('lost', 'tokens missing + repeated'), ('received', 'tokens delivered'),
    ('server_runq_wait_share', 'server processes\' wait for their core, share of the cell'),
    ('loadavg', 'load average at the cell\'s end'),
]


def paired(res, peer, key, fn):
    """fn(threadcast's value, the peer's) of each bench run where both have key: their median."""
    pairs = zip(res.get('threadcast', []), res.get(peer, []))
    return median([fn(a[key], b[key]) for a, b in pairs
                   if 'error' not in a and 'error' not in b and a.get(key) is not None and b.get(key)])


def report_tokens(res, peer='agent-server', paired_runs=False):
    """A tokens scenario: a row per cell and metric, threadcast beside its peer (the Agent Server,
    LangGraph's Python server). paired_runs: the ratio column is the median of the per-run ratios
    (each bench run measures both sides), and the latency rows say threadcast − peer too."""
    kinds = [k for k in ('threadcast', peer) if k in res]
    good = {k: [r for r in res[k] if 'error' not in r] for k in kinds}
    both = len(kinds) == 2
    print(f'\n### {res["title"]}\n')
    print('| cell | metric | ' + ' | '.join(kinds) + (f' | threadcast / {peer}' if both else '')
          + (' | threadcast − ' + peer if both and paired_runs else '') + ' |')
    print('|---|---|' + '---|' * (len(kinds) + both + (both and paired_runs)))
    cells = []
    for runs in good.values():
        for r in runs:
            for key in r:
                cell = key.rsplit(' ', 1)[0]
                if key.startswith('idle ') or key.endswith(' error') or cell in cells:
                    continue
                cells.append(cell)
    rows = [(c, f'{c} {key}', label) for c in cells for key, label in TOKEN_METRICS]
    rows += [('idle', f'idle {route} kib_per_viewer', f'RSS KiB / idle viewer, {route}')
             for route in ('rest', 'websocket', 'sse')]
    for cell, key, label in rows:
        vals = [median([r.get(key) for r in good[k]]) for k in kinds]
        if all(v is None for v in vals):
            continue
        line = f'| {cell} | {label} | ' + ' | '.join('—' if v is None else f'{v:,.2f}' for v in vals)
        if both and paired_runs:
            ratio = paired(res, peer, key, lambda a, b: a / b)
            line += ' | ' + ('—' if ratio is None else f'{ratio:.2f}')
            diff = paired(res, peer, key, lambda a, b: a - b) if key.endswith('_ms') else None
            line += ' | ' + ('—' if diff is None else f'{diff:+,.2f}')
        elif both:
            line += ' | ' + ('—' if None in vals or not vals[1] else f'{vals[0] / vals[1]:.2f}')
        print(line + ' |')
    for k in kinds:
        for r in res[k]:
            for key, v in r.items():
                if key == 'error' or key.endswith(' error'):
                    print(f'{k}: {key}: {v}')


def report(results):
    """One table: a column per system (the blaster last), then threadcast / each other."""
    if not results:
        return
    def med(runs, key):
        return median([r.get(key) for r in runs if 'error' not in r])

    def fmt(v):
        return '—' if v is None else (f'{v:,.2f}' if isinstance(v, float) and v < 100 else f'{v:,.0f}')

    systems = []
    for res in results.values():
        for k in res:
            if k != 'title' and k not in systems:
                systems.append(k)
    systems.sort(key=lambda k: (k == 'blaster', k != 'threadcast'))
    others = systems[1:]
    print('\n| scenario | metric | ' + ' | '.join(systems) + ''.join(f' | threadcast / {o}' for o in others) + ' |')
    print('|---|---|' + '---|' * (len(systems) + len(others)))
    for name, res in results.items():
        if name == 'tokens':
            continue
        for runs in res.values():
            if isinstance(runs, list):
                for r in runs:
                    if 'latency_us' in r:
                        r['latency_p50_ms'] = r['latency_us']['p50'] / 1000
                        r['latency_p99_ms'] = r['latency_us']['p99'] / 1000
                        r['lost'] = r['missing'] + r['duplicates']
        for key, label in METRICS:
            vals = [med(res.get(k, []), key) for k in systems]
            if all(v is None for v in vals):
                continue
            ratios = [('—' if key.endswith('_vs_blaster') or vals[0] is None or v in (None, 0)
                       else f'{vals[0] / v:.2f}') for v in vals[1:]]
            print(f'| {name}: {res["title"]} | {label} | ' + ' | '.join(fmt(v) for v in vals)
                  + ''.join(f' | {x}' for x in ratios) + ' |')


if __name__ == '__main__':
    main()
