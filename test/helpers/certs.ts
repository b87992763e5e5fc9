/**
 * Throw-away certificates for TLS tests, made by the openssl CLI in a private
 * temporary directory at test time (no private key is ever committed).
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** A certificate and its private key, as PEM file paths. */
export interface KeyPair {
  cert: string;
  key: string;
}

/** A certificate authority that can issue leaf certificates into its directory. */
export interface TestCa extends KeyPair {
  /** Issues a leaf certificate (serverAuth and clientAuth) for `hosts` (IPs and DNS names). */
  issue(name: string, opts?: { hosts?: string[]; days?: number; into?: KeyPair }): Promise<KeyPair>;
}

/** Everything a TLS test needs: a CA, a server and a client certificate, and a second, untrusted CA. */
export interface TestPki {
  dir: string;
  ca: TestCa;
  server: KeyPair;
  client: KeyPair;
  /** A CA nobody trusts, and a client certificate it signed. */
  rogueCa: TestCa;
  rogueClient: KeyPair;
  /** Removes the directory and every key in it. */
  cleanup(): Promise<void>;
}

const LOOPBACK_HOSTS = ['127.0.0.1', '::1', 'localhost'];

/** Creates a fresh PKI in a new temporary directory (0700). */
export async function createPki(opts: { hosts?: string[] } = {}): Promise<TestPki> {
  const dir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'agent-pki-'));
  await fs.promises.chmod(dir, 0o700);
  const hosts = opts.hosts ?? LOOPBACK_HOSTS;
  const ca = await createCa(dir, 'test-ca');
  const rogueCa = await createCa(dir, 'rogue-ca');
  const [server, client, rogueClient] = await Promise.all([
    ca.issue('server', { hosts }),
    ca.issue('client', { hosts: [] }),
    rogueCa.issue('rogue-client', { hosts: [] }),
  ]);
  return {
    dir,
    ca,
    server,
    client,
    rogueCa,
    rogueClient,
    cleanup: () => fs.promises.rm(dir, { recursive: true, force: true }),
  };
}

/** True when the openssl CLI is on PATH (the TLS tests need it). */
export async function hasOpenssl(): Promise<boolean> {
  try {
    await openssl(['version']);
    return true;
  } catch {
    return false;
  }
}

async function createCa(dir: string, name: string): Promise<TestCa> {
  const cert = path.join(dir, `${name}.crt`);
  const key = path.join(dir, `${name}.key`);
  await openssl([
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    key,
    '-out',
    cert,
    '-days',
    '2',
    '-subj',
    `/CN=${name}`,
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  ]);
  await fs.promises.chmod(key, 0o600);
  let serial = 0;
  return {
    cert,
    key,
    issue: async (leaf, issueOpts = {}) => {
      serial += 1;
      const out = issueOpts.into ?? { cert: path.join(dir, `${leaf}.crt`), key: path.join(dir, `${leaf}.key`) };
      // Write next to the target and rename, so a reader never sees half a file.
      const tmp = path.join(dir, `.${leaf}-${serial}-${process.pid}`);
      const csr = `${tmp}.csr`;
      const ext = `${tmp}.ext`;
      const sans = (issueOpts.hosts ?? LOOPBACK_HOSTS).map((h) => (/^[\d.]+$|:/.test(h) ? `IP:${h}` : `DNS:${h}`));
      await fs.promises.writeFile(
        ext,
        [
          'basicConstraints=CA:FALSE',
          'keyUsage=critical,digitalSignature,keyEncipherment',
          'extendedKeyUsage=serverAuth,clientAuth',
          ...(sans.length > 0 ? [`subjectAltName=${sans.join(',')}`] : []),
        ].join('\n'),
      );
      await openssl([
        'req',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-keyout',
        `${tmp}.key`,
        '-out',
        csr,
        '-subj',
        `/CN=${leaf}`,
      ]);
      await fs.promises.chmod(`${tmp}.key`, 0o600);
      await openssl([
        'x509',
        '-req',
        '-in',
        csr,
        '-CA',
        cert,
        '-CAkey',
        key,
        '-set_serial',
        String(Date.now() * 100 + serial),
        '-days',
        String(issueOpts.days ?? 2),
        '-extfile',
        ext,
        '-out',
        `${tmp}.crt`,
      ]);
      await fs.promises.rename(`${tmp}.key`, out.key);
      await fs.promises.rename(`${tmp}.crt`, out.cert);
      await Promise.all([fs.promises.rm(csr, { force: true }), fs.promises.rm(ext, { force: true })]);
      return out;
    },
  };
}

function openssl(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('openssl', args, { timeout: 20_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`openssl ${args[0]} failed: ${String(stderr).trim() || err.message}`));
      else resolve(String(stdout));
    });
  });
}
