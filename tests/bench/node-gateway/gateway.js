// The Node.js gateway a team would write instead of threadcast, as scripts/bench
// runs it: ws + ioredis, one process. Clients connect to /threads/:id/stream
// and send subscription.subscribe; the gateway SSUBSCRIBEs the thread's Redis
// doorbell channel (sharded pub/sub, as the producer SPUBLISHes it) (one Redis subscription per thread, shared) and forwards
// each event in the same envelope threadcast sends. Live only: no replay.
//
//   node gateway.js PORT REDIS_PORT
import http from 'node:http';
import Redis from 'ioredis';
import { WebSocketServer } from 'ws';

const [port, redisPort] = process.argv.slice(2).map(Number);
const sub = new Redis({ port: redisPort, host: '127.0.0.1' });
const watchers = new Map(); // channel → Set of sockets

sub.on('smessageBuffer', (channel, message) => {
  const sockets = watchers.get(channel.toString());
  if (!sockets) return;
  // Doorbell: epoch \n seq \n method \n namespace \n event JSON
  const text = message.toString();
  let at = 0;
  const parts = [];
  for (let i = 0; i < 4; i++) {
    const nl = text.indexOf('\n', at);
    parts.push(text.slice(at, nl));
    at = nl + 1;
  }
  const frame = `{"type":"event","eventId":"${parts[0]}:${parts[1]}","seq":${parts[1]},${text.slice(at + 1)}`;
  for (const ws of sockets) ws.send(frame);
});

const server = http.createServer((req, res) => { res.writeHead(404).end(); });
const wss = new WebSocketServer({ server });
wss.on('connection', (ws, req) => {
  const m = /^\/threads\/([^/]+)\/stream/.exec(req.url);
  if (!m) { ws.close(1008, 'bad path'); return; }
  const channel = `tc:{${m[1]}}:live`;
  ws.on('message', (data) => {
    let cmd;
    try { cmd = JSON.parse(data); } catch { return; }
    if (cmd.method !== 'subscription.subscribe') return;
    let sockets = watchers.get(channel);
    if (!sockets) {
      sockets = new Set();
      watchers.set(channel, sockets);
      sub.ssubscribe(channel);
    }
    sockets.add(ws);
    ws.send(JSON.stringify({ type: 'success', id: cmd.id, result: { subscriptionId: 's1' } }));
  });
  ws.on('close', () => {
    const sockets = watchers.get(channel);
    if (!sockets) return;
    sockets.delete(ws);
    if (!sockets.size) { watchers.delete(channel); sub.sunsubscribe(channel); }
  });
});
server.listen(port, '127.0.0.1', () => console.error(JSON.stringify({ msg: 'listening', port })));
