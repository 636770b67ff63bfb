// A real browser's EventSource (headless Chromium, Debian's) reads the GET form.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';
import { startRedis, startThreadcast, stopAll, produce, waitUntil } from './lib/harness.mjs';
import { mix, expectedSeqs } from './lib/events.mjs';

let redis, tc, browser;
before(async () => {
  redis = await startRedis();
  tc = await startThreadcast({ redisUrl: redis.url });
  await tc.ready();
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
});
after(async () => {
  await browser?.close();
  const reports = tc.sanitizerReports();
  await stopAll();
  await redis.cleanup();
  assert.deepEqual(reports, [], tc.stderr);
});

test('EventSource in Chromium receives the filtered events with their ids and types', async () => {
  const page = await browser.newPage();
  // Same origin as the stream: the page is served by threadcast's /healthz host.
  await page.goto(`http://127.0.0.1:${tc.port}/healthz`);
  const events = mix(300);
  await produce(redis.url, 'browser1', events);
  const want = expectedSeqs({ channels: ['messages', 'lifecycle'] }, events);
  const got = await page.evaluate(async ({ n }) => {
    const seen = [];
    const es = new EventSource('/threads/browser1/stream?channels=messages,lifecycle');
    await new Promise((resolve, reject) => {
      const done = () => { if (seen.length >= n) resolve(); };
      for (const type of ['messages', 'lifecycle']) {
        es.addEventListener(type, (e) => {
          const d = JSON.parse(e.data);
          seen.push({ seq: d.seq, id: e.lastEventId, type: e.type, method: d.method });
          done();
        });
      }
      setTimeout(() => reject(new Error(`only ${seen.length} events`)), 10000);
    });
    es.close();
    return seen;
  }, { n: want.length });
  assert.deepEqual(got.map((e) => e.seq), want);
  for (const e of got) {
    assert.equal(e.type, e.method);
    assert.match(e.id, new RegExp(`:${e.seq}$`));
  }
  await page.close();
});
