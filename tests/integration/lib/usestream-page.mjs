// The useStream page (browser/usestream-app.jsx, LangChain's React hook on
// @langchain/langgraph-sdk) bundled by esbuild and served from an origin of its
// own, for the tests that drive it in Chromium against threadcast.
import http from 'node:http';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';

const browserDir = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'browser');

/** Bundles the page into a new temp dir; resolves with the dir. */
export async function buildPage() {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tc-usestream-'));
  await esbuild.build({
    entryPoints: [path.join(browserDir, 'usestream-app.jsx')],
    bundle: true, outdir: dir, format: 'esm', platform: 'browser', target: 'es2022',
    jsx: 'automatic', define: { 'process.env.NODE_ENV': '"production"' }, logLevel: 'silent',
  });
  await fs.writeFile(path.join(dir, 'index.html'), '<!doctype html><html><head><meta charset="utf-8">'
    + '<title>useStream on threadcast</title></head><body><div id="root"></div>'
    + '<script type="module" src="/usestream-app.js"></script></body></html>');
  return dir;
}

/** Serves dir's files on 127.0.0.1 (a port of its own: an origin other than the API's). */
export function servePage(dir) {
  const types = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8' };
  const server = http.createServer(async (req, res) => {
    const name = new URL(req.url, 'http://x').pathname.slice(1) || 'index.html';
    try {
      const body = await fs.readFile(path.join(dir, path.basename(name)));
      res.writeHead(200, { 'content-type': types[path.extname(name)] ?? 'application/octet-stream' });
      res.end(body);
    } catch {
      res.writeHead(404);
      res.end();
    }
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}
