// Imports a package's ESM entry from the first of some directories (and their
// parents) whose node_modules holds it: graph.mjs takes LangGraph from its host
// process's own install, clients.mjs takes the SDK from this folder's install,
// else from tests/integration's (the same pinned SDK), so scripts/test can run
// a tiny cell of the tokens scenario without installing the bench's peer.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

/** The module `spec` ('@langchain/core/messages', 'ws') as installed under the first of `starts`. */
export async function load(spec, starts) {
  const parts = spec.split('/');
  const n = spec.startsWith('@') ? 2 : 1;
  const name = parts.slice(0, n).join('/');
  const sub = parts.length > n ? `./${parts.slice(n).join('/')}` : '.';
  for (const start of starts) {
    for (let dir = start; ; dir = path.dirname(dir)) {
      const pkgDir = path.join(dir, 'node_modules', name);
      const pkgFile = path.join(pkgDir, 'package.json');
      if (existsSync(pkgFile)) {
        const pkg = JSON.parse(readFileSync(pkgFile, 'utf8'));
        let entry = pkg.exports?.[sub] ?? (sub === '.' ? pkg.main ?? 'index.js' : sub);
        if (typeof entry === 'object') entry = entry.import ?? entry.default ?? entry.node;
        if (typeof entry === 'object') entry = entry.default;
        return import(pathToFileURL(path.join(pkgDir, entry)).href);
      }
      if (path.dirname(dir) === dir) break;
    }
  }
  throw new Error(`${spec}: not installed under ${starts.join(' or ')}`);
}
