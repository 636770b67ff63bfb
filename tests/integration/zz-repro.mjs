import { restStack, question, jsonResponse, openSse, sleep } from './lib/rest.mjs';
const s = await restStack({ tokenMs: 40 });
try {
  const tid = (await jsonResponse(await s.http('/threads', { method: 'POST', json: {} }))).thread_id;
  const run = await jsonResponse(await s.http(`/threads/${tid}/runs`, { method: 'POST',
    json: { assistant_id: 'agent', input: question('q'), stream_mode: ['values', 'messages-tuple', 'updates'], stream_subgraphs: true } }));
  console.log('run', run.status, run.run_id);
  const url = `${s.apiUrl}/threads/${tid}/runs/${run.run_id}/stream`;
  const first = await openSse(url, { headers: { 'Last-Event-ID': '-1' } });
  console.log('status', first.res.status, first.res.headers.get('content-type'));
  await sleep(6000);
  console.log('events', first.sse.events.length, first.sse.events.slice(0,3).map(e=>e.event+':'+e.id));
  const ev = await s.rc.cmd('XLEN', `tc:{${tid}}:events`);
  console.log('xlen', ev, await s.rc.cmd('HGETALL', `{tc:commands}:r:${run.run_id}`));
} finally { await s.done().catch((e) => console.log('done', e.message)); }
