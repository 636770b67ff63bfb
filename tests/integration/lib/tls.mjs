// Certificates for the TLS tests, made with the openssl command line in a
// temp dir: a CA, a server certificate it signs for 127.0.0.1 and localhost,
// a client certificate it signs, and two a client must refuse: one for the
// right names signed by another CA, one signed by the CA for another name.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

function openssl(dir, ...args) {
  execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
}

/**
 * Makes the certificates; resolves to { dir, ca, otherCa, server, client, stranger, wrongHost },
 * each certificate as { cert, key } (paths), the CAs as paths to their certificates.
 */
export function makeCertificates() {
  const dir = mkdtempSync(path.join(tmpdir(), 'tc-tls-'));
  const ca = (name) => openssl(dir, 'req', '-x509', ...ec, '-keyout', `${name}.key`, '-out', `${name}.crt`,
    '-days', '2', '-subj', `/CN=${name}`);
  const sign = (name, by, san, usage) => {
    openssl(dir, 'req', ...ec, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`);
    writeFileSync(path.join(dir, `${name}.ext`), `subjectAltName=${san}\nextendedKeyUsage=${usage}\n`);
    openssl(dir, 'x509', '-req', '-in', `${name}.csr`, '-CA', `${by}.crt`, '-CAkey', `${by}.key`, '-CAcreateserial',
      '-out', `${name}.crt`, '-days', '2', '-extfile', `${name}.ext`);
    return { cert: path.join(dir, `${name}.crt`), key: path.join(dir, `${name}.key`) };
  };
  ca('tc-test-ca');
  ca('tc-other-ca');
  return {
    dir,
    ca: path.join(dir, 'tc-test-ca.crt'),
    otherCa: path.join(dir, 'tc-other-ca.crt'),
    server: sign('server', 'tc-test-ca', 'DNS:localhost,IP:127.0.0.1', 'serverAuth'),
    client: sign('client', 'tc-test-ca', 'DNS:tc-client', 'clientAuth'),
    stranger: sign('stranger', 'tc-other-ca', 'DNS:localhost,IP:127.0.0.1', 'serverAuth'),
    wrongHost: sign('wrong-host', 'tc-test-ca', 'DNS:wrong.example', 'serverAuth'),
  };
}
