import { restStack, question, jsonResponse } from './lib/rest.mjs';
const s = await restStack({ tokenMs: 1 });
try {
  const post = (p, j) => s.http(p, { method: 'POST', json: j });
  const tid = (await jsonResponse(await post('/threads', {}))).thread_id;
  await jsonResponse(await post(`/threads/${tid}/runs/wait`, { assistant_id: 'agent', input: question('tell me about otters') }));
  const ev = await s.rc.cmd('XRANGE', `tc:{${tid}}:events`, '-', '+');
  for (const [id, f] of ev) { if (f[3].includes('tools') || f[5].includes('"role":"tool"')) console.log(id, f[1], f[3], f[5].slice(0, 900)); }
} finally { await s.done().catch((e) => console.log('done', e.message)); }
