// What a browser front end needs of the HTTP API beyond the routes: CORS
// (--cors-origins: preflights answered, Location and Content-Location
// exposed, other origins refused), HEAD wherever GET is, GET /info and /ok
// as the Agent Server answers them, and run streams framed so that a cut
// connection is an error to the client (chunked), never a clean end.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { startRedis, startThreadcast, startWorker, stopAll, waitUntil } from './lib/harness.mjs';
import { graphsModule, question } from './lib/rest.mjs';

after(stopAll);

/** One raw HTTP/1.1 exchange: resolves {head, body, headers, status, closed} once the server closes or ms pass. */
function raw(port, text, ms = 3000) {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    let data = Buffer.alloc(0);
    const done = (closed) => {
      s.destroy();
      const t = data.toString('latin1');
      const i = t.indexOf('\r\n\r\n');
      const head = i < 0 ? t : t.slice(0, i);
      const headers = Object.fromEntries(head.split('\r\n').slice(1).map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
      resolve({ head, body: i < 0 ? '' : t.slice(i + 4), headers, status: Number(head.split(' ')[1]), closed });
    };
    const timer = setTimeout(() => done(false), ms);
    s.on('data', (d) => { data = Buffer.concat([data, d]); });
    s.on('close', () => { clearTimeout(timer); done(true); });
    s.on('error', () => {});
    s.write(text);
  });
}

/** Decodes a chunked body; throws on bad framing. {chunks, text, last}: last is whether the last chunk came. */
function dechunk(body) {
  const out = [];
  let i = 0;
  for (;;) {
    const j = body.indexOf('\r\n', i);
    if (j < 0) return { chunks: out.length, text: out.join(''), last: false };
    const size = parseInt(body.slice(i, j), 16);
    assert.ok(Number.isInteger(size), `a chunk size line: ${JSON.stringify(body.slice(i, j + 2))}`);
    if (size === 0) return { chunks: out.length, text: out.join(''), last: true };
    if (body.length < j + 2 + size + 2) return { chunks: out.length, text: out.join(''), last: false };
    out.push(body.slice(j + 2, j + 2 + size));
    assert.equal(body.slice(j + 2 + size, j + 4 + size), '\r\n', 'a chunk ends with CRLF');
    i = j + 4 + size;
  }
}

describe('CORS, HEAD, /info and /ok', () => {
  let redis, tc;
  before(async () => {
    redis = await startRedis();
    tc = await startThreadcast({ redisUrl: redis.url, args: ['--cors-origins', 'http://localhost:*,https://app.example.com'] });
    await tc.ready();
  });
  after(async () => {
    const reports = tc.sanitizerReports();
    await tc.stop();
    await redis.cleanup();
    assert.deepEqual(reports, []);
  });

  test('a preflight from an allowed origin is answered: methods, the headers asked for, how long to keep it', async () => {
    const r = await tc.http('/threads/t1/runs/stream', { method: 'OPTIONS', headers: {
      origin: 'http://localhost:3000', 'access-control-request-method': 'POST',
      'access-control-request-headers': 'content-type,x-api-key' } });
    assert.equal(r.status, 204);
    assert.equal(r.headers.get('access-control-allow-origin'), 'http://localhost:3000');
    assert.match(r.headers.get('access-control-allow-methods'), /\bPOST\b/);
    assert.match(r.headers.get('access-control-allow-methods'), /\bPATCH\b/);
    assert.equal(r.headers.get('access-control-allow-headers'), 'content-type,x-api-key');
    assert.equal(r.headers.get('access-control-max-age'), '600');
    assert.match(r.headers.get('vary'), /Origin/);
  });

  test('a port wildcard is for that host only; another origin is refused with 403 and no CORS header', async () => {
    for (const origin of ['http://localhost:5173', 'https://app.example.com']) {
      const r = await tc.http('/threads', { method: 'OPTIONS', headers: { origin, 'access-control-request-method': 'POST' } });
      assert.equal(r.status, 204, origin);
      assert.equal(r.headers.get('access-control-allow-origin'), origin);
    }
    for (const origin of ['http://evil.example.com', 'http://localhost.evil.com:80', 'https://localhost:3000', 'http://app.example.com']) {
      const r = await tc.http('/threads', { method: 'OPTIONS', headers: { origin, 'access-control-request-method': 'POST' } });
      assert.equal(r.status, 403, origin);
      assert.equal(r.headers.get('access-control-allow-origin'), null);
      assert.match((await r.json()).message, /may not call this API \(--cors-origins\)/);
    }
  });

  test('answers to an allowed origin expose Location and Content-Location; others get no CORS header', async () => {
    const r = await tc.http('/threads', { method: 'POST', headers: { origin: 'https://app.example.com', 'content-type': 'application/json' }, body: '{}' });
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('access-control-allow-origin'), 'https://app.example.com');
    assert.match(r.headers.get('access-control-expose-headers'), /\bLocation\b/);
    assert.match(r.headers.get('access-control-expose-headers'), /\bContent-Location\b/);
    const other = await tc.http('/ok', { headers: { origin: 'http://nope.example.com' } });
    assert.equal(other.status, 200);
    assert.equal(other.headers.get('access-control-allow-origin'), null);
    const none = await tc.http('/ok');
    assert.equal(none.headers.get('access-control-allow-origin'), null, 'not a browser: no CORS headers');
  });

  test('GET /info and /ok answer as the Agent Server does', async () => {
    const info = await (await tc.http('/info')).json();
    assert.equal(typeof info.version, 'string');
    assert.equal(info.flags.assistants, true);
    assert.equal(info.flags.crons, false);
    assert.deepEqual(await (await tc.http('/ok')).json(), { ok: true });
  });

  test('HEAD is GET without its body, wherever GET is', async () => {
    for (const p of ['/info', '/healthz', '/threads/t1/state']) {
      const get = await raw(tc.port, `GET ${p} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
      const head = await raw(tc.port, `HEAD ${p} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
      assert.equal(head.status, get.status, p);
      assert.equal(head.headers['content-type'], get.headers['content-type'], p);
      assert.equal(head.headers['content-length'], get.headers['content-length'], p);
      assert.ok(get.body.length > 0, `${p}: GET has a body`);
      assert.equal(head.body, '', `${p}: HEAD has none`);
    }
    const sse = await raw(tc.port, 'HEAD /threads/t1/stream?channels=messages HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n');
    assert.equal(sse.status, 200);
    assert.equal(sse.headers['content-type'], 'text/event-stream');
    assert.equal(sse.body, '', 'a stream\'s HEAD is its head alone');
    const missing = await raw(tc.port, 'HEAD /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    assert.equal(missing.status, 404);
    assert.equal(missing.body, '');
  });

  test('a bad --cors-origins stops threadcast at start, naming the setting', async () => {
    const bad = await startThreadcast({ redisUrl: redis.url, args: ['--cors-origins', 'localhost:3000'] }).catch((e) => e);
    assert.match(String(bad.message ?? bad), /--cors-origins \/ THREADCAST_CORS_ORIGINS: "localhost:3000" is not valid/);
  });
});

describe('run streams: a cut connection is an error, the run\'s end a clean end', () => {
  let redis, tc, worker;
  before(async () => {
    redis = await startRedis();
    tc = await startThreadcast({ redisUrl: redis.url });
    await tc.ready();
    worker = await startWorker(redis.url, { name: 'framing', args: ['--graphs', graphsModule], env: { THREADCAST_FAKE_TOKEN_MS: '20' } });
  });
  after(async () => {
    await worker?.kill('SIGTERM');
    const reports = tc?.sanitizerReports() ?? [];
    if (tc?.exitCode === null && tc?.signal === null) await tc.stop();
    await redis?.cleanup();
    assert.deepEqual(reports, []);
  });

  const createThread = async () => (await (await tc.http('/threads', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).json()).thread_id;

  test('HTTP/1.1: chunked, every event in whole chunks, and the last chunk once the run ended', async () => {
    const tid = await createThread();
    const body = JSON.stringify({ assistant_id: 'agent', input: question('chunks please'), stream_mode: ['values'] });
    const r = await raw(tc.port, `POST /threads/${tid}/runs/stream HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`, 20000);
    assert.equal(r.status, 200);
    assert.equal(r.headers['transfer-encoding'], 'chunked');
    assert.equal(r.headers['content-length'], undefined);
    // The connection goes with the stream: said so that a client (undici) sends nothing more on it,
    // as the SDK's check of the run, made as its stream ends, would race the close.
    assert.equal(r.headers['keep-alive'], 'timeout=0');
    const d = dechunk(r.body);
    assert.ok(d.last, 'the body ends with the last chunk');
    assert.ok(r.closed);
    assert.match(d.text, /^event: metadata\n/m);
    assert.ok((d.text.match(/^event: values$/gm) ?? []).length >= 2, 'the run\'s values');
  });

  test('HTTP/1.0: no chunks, the end of the connection ends the stream', async () => {
    const tid = await createThread();
    const body = JSON.stringify({ assistant_id: 'agent', input: question('old client'), stream_mode: ['values'] });
    const r = await raw(tc.port, `POST /threads/${tid}/runs/stream HTTP/1.0\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`, 20000);
    assert.equal(r.status, 200);
    assert.equal(r.headers['transfer-encoding'], undefined);
    assert.match(r.body, /^event: metadata\n/m);
    assert.ok(r.closed);
  });

  test('a gateway killed mid-run: fetch rejects the body (an error to resume from), not a clean end', async () => {
    const tid = await createThread();
    const res = await tc.http(`/threads/${tid}/runs/stream`, { method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ assistant_id: 'agent', input: question('a long answer that will be cut short'), stream_mode: ['messages-tuple'] }) });
    assert.equal(res.status, 200);
    let got = 0;
    const outcome = (async () => { for await (const c of res.body) got += c.length; })().then(() => 'a clean end', (e) => e);
    await waitUntil(() => got > 2000, 20000, 'the stream to be under way');
    await tc.stop('SIGKILL');
    const e = await outcome;
    assert.ok(e instanceof Error, `a cut chunked body is an error to fetch, got ${e}`);
    assert.match(String(e.cause?.message ?? e.message), /other side closed|terminated/);
  });
});
