/**
 * The etcd TLS rotation decision (agent/etcd/credentials.ts) on real PEM files
 * made by openssl: what is swapped in, what is kept, and why; then the watcher
 * on files rewritten in place and swapped as a Secret volume does; then how
 * long replaced clients stay open (agent/etcd/retiring-clients.ts).
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Etcd3 } from 'etcd3';
import { decideCredentials, EtcdCredentials, EtcdTlsBytes, validateTlsBytes } from '../../agent/etcd/credentials';
import { RetiringClients } from '../../agent/etcd/retiring-clients';
import { createLogger } from '../../agent/observability/logger';
import { createPki, TestPki } from '../helpers/certs';
import { captureLogs } from '../helpers/log-capture';

let pki: TestPki;
/** Bytes of the PKI's files by role. */
const b: Record<string, Buffer> = {};

beforeAll(async () => {
  pki = await createPki();
  const next = await pki.ca.issue('client-next', { hosts: [] });
  const files = {
    ca: pki.ca.cert,
    rogueCa: pki.rogueCa.cert,
    cert: pki.client.cert,
    key: pki.client.key,
    nextCert: next.cert,
    nextKey: next.key,
  };
  for (const [name, file] of Object.entries(files)) b[name] = fs.readFileSync(file);
  b.bundle = Buffer.concat([b.ca, b.rogueCa]);
}, 30_000);
afterAll(() => pki?.cleanup());

const half = (buf: Buffer): Buffer => buf.subarray(0, Math.floor(buf.length / 2));

describe('decideCredentials', () => {
  // What is in use: the CA, the client pair.
  const current = (): ReturnType<typeof validateTlsBytes> => validateTlsBytes({ ca: b.ca, cert: b.cert, key: b.key });

  // Each row: what happened to the files, the decision, its reason (for a rejection), and what the files read as.
  it.each<[string, 'swap' | 'unchanged' | 'reject', RegExp, () => EtcdTlsBytes]>([
    ['the same bytes are read again (a touch, a re-projected Secret)', 'unchanged', /^$/, () => ({ ca: b.ca, cert: b.cert, key: b.key })],
    ['a new pair of the same CA is complete', 'swap', /^$/, () => ({ ca: b.ca, cert: b.nextCert, key: b.nextKey })],
    ['only the CA file changed, to a bundle of old and new CA', 'swap', /^$/, () => ({ ca: b.bundle, cert: b.cert, key: b.key })],
    [
      'the new certificate is there but the key is still the old one (half a rotation)',
      'reject',
      /does not belong/,
      () => ({ ca: b.ca, cert: b.nextCert, key: b.key }),
    ],
    ['the certificate file is half written', 'reject', /incomplete/, () => ({ ca: b.ca, cert: half(b.nextCert), key: b.nextKey })],
    [
      'the certificate file is empty (truncated before the write)',
      'reject',
      /empty/,
      () => ({ ca: b.ca, cert: Buffer.alloc(0), key: b.nextKey }),
    ],
    ['the key file is half written', 'reject', /key does not parse/, () => ({ ca: b.ca, cert: b.nextCert, key: half(b.nextKey) })],
    ['the CA file is half written', 'reject', /incomplete/, () => ({ ca: half(b.ca), cert: b.cert, key: b.key })],
    [
      'the CA bundle is cut inside its second certificate',
      'reject',
      /incomplete/,
      () => ({ ca: b.bundle.subarray(0, b.ca.length + 200), cert: b.cert, key: b.key }),
    ],
    [
      'the CA file holds a key instead of a certificate',
      'reject',
      /not a CERTIFICATE|no PEM certificate/,
      () => ({ ca: b.key, cert: b.cert, key: b.key }),
    ],
    ['the CA file is empty', 'reject', /no PEM certificate/, () => ({ ca: Buffer.alloc(0), cert: b.cert, key: b.key })],
    ['a certificate comes without its key', 'reject', /needs its key/, () => ({ ca: b.ca, cert: b.cert })],
    [
      'a certificate block is garbage between valid markers',
      'reject',
      /does not parse/,
      () => ({ ca: b.ca, cert: Buffer.from('-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n'), key: b.key }),
    ],
  ])('when %s, then the decision is %s', (_what, action, reason, read) => {
    const decision = decideCredentials(current(), read());
    expect(decision.action).toBe(action);
    if (decision.action === 'reject') expect(decision.reason).toMatch(reason);
    if (decision.action === 'swap') expect(decision.material.digest).not.toBe(current().digest);
  });

  it('when nothing is in use yet, then valid material is swapped in and its certificate described without the key', () => {
    const decision = decideCredentials(undefined, { ca: b.bundle, cert: b.cert, key: b.key });
    expect(decision.action).toBe('swap');
    if (decision.action !== 'swap') return;
    expect(decision.material.caCertificates).toBe(2);
    expect(decision.material.certificate?.subject).toMatch(/CN=client/);
    expect(JSON.stringify(decision.material.certificate)).not.toMatch(/PRIVATE KEY/);
  });

  it('when the same bytes are decided twice, then the answers are equal (a pure function)', () => {
    const read = { ca: b.ca, cert: b.nextCert, key: b.key };
    expect(decideCredentials(current(), read)).toEqual(decideCredentials(current(), read));
  });
});

describe('EtcdCredentials watching real files', () => {
  const setup = (): { dir: string; logs: () => string; changes: string[]; creds: EtcdCredentials } => {
    const dir = fs.mkdtempSync(path.join(pki.dir, 'watch-'));
    fs.writeFileSync(path.join(dir, 'ca.crt'), b.ca);
    fs.writeFileSync(path.join(dir, 'tls.crt'), b.cert);
    fs.writeFileSync(path.join(dir, 'tls.key'), b.key);
    const { stream, text } = captureLogs();
    const creds = new EtcdCredentials(
      { caFile: path.join(dir, 'ca.crt'), certFile: path.join(dir, 'tls.crt'), keyFile: path.join(dir, 'tls.key') },
      { logger: createLogger({ stream, level: 'debug' }) },
    );
    const changes: string[] = [];
    creds.onChange((m) => changes.push(m.certificate?.fingerprint256 ?? ''));
    return { dir, logs: text, changes, creds };
  };

  it('when the pair is rewritten in place one file after the other, then the old pair stays until both are new, with one warning', () => {
    const { dir, logs, changes, creds } = setup();
    const before = creds.current().digest;

    fs.writeFileSync(path.join(dir, 'tls.crt'), b.nextCert);
    expect(creds.check()).toBe(false);
    expect(creds.check()).toBe(false);
    expect(creds.current().digest).toBe(before);
    expect(logs().match(/do not load; keeping the previous credentials/g)).toHaveLength(1);

    fs.writeFileSync(path.join(dir, 'tls.key'), b.nextKey);
    expect(creds.check()).toBe(true);
    expect(changes).toHaveLength(1);
    expect(creds.current().cert).toEqual(b.nextCert);
    expect(logs()).toContain('etcd TLS credentials reloaded');
    expect(logs()).not.toMatch(/PRIVATE KEY/);
  });

  it('when the files are touched or rewritten with the same bytes, then nothing is swapped', () => {
    const { dir, changes, creds } = setup();
    fs.writeFileSync(path.join(dir, 'tls.crt'), b.cert);
    const later = new Date(Date.now() + 5000);
    fs.utimesSync(path.join(dir, 'tls.key'), later, later);
    expect(creds.check()).toBe(false);
    expect(changes).toHaveLength(0);
  });

  it('when a Secret volume swaps its ..data symlink, then certificate, key and CA change together', () => {
    const root = fs.mkdtempSync(path.join(pki.dir, 'secret-'));
    const version = (name: string, files: Record<string, Buffer>): void => {
      fs.mkdirSync(path.join(root, name));
      for (const [file, bytes] of Object.entries(files)) fs.writeFileSync(path.join(root, name, file), bytes);
    };
    version('..2026_01', { 'ca.crt': b.ca, 'tls.crt': b.cert, 'tls.key': b.key });
    fs.symlinkSync('..2026_01', path.join(root, '..data'));
    for (const f of ['ca.crt', 'tls.crt', 'tls.key']) fs.symlinkSync(path.join('..data', f), path.join(root, f));
    const creds = new EtcdCredentials({
      caFile: path.join(root, 'ca.crt'),
      certFile: path.join(root, 'tls.crt'),
      keyFile: path.join(root, 'tls.key'),
    });
    const changes: number[] = [];
    creds.onChange((m) => changes.push(m.caCertificates));

    version('..2026_02', { 'ca.crt': b.bundle, 'tls.crt': b.nextCert, 'tls.key': b.nextKey });
    fs.symlinkSync('..2026_02', path.join(root, '..data_tmp'));
    fs.renameSync(path.join(root, '..data_tmp'), path.join(root, '..data'));
    fs.rmSync(path.join(root, '..2026_01'), { recursive: true });

    expect(creds.check()).toBe(true);
    expect(changes).toEqual([2]);
    expect(creds.current().cert).toEqual(b.nextCert);
  });

  it('when the files do not load at start, then construction fails naming the variables', () => {
    const dir = fs.mkdtempSync(path.join(pki.dir, 'bad-'));
    fs.writeFileSync(path.join(dir, 'ca.crt'), b.ca);
    fs.writeFileSync(path.join(dir, 'tls.crt'), b.nextCert);
    fs.writeFileSync(path.join(dir, 'tls.key'), b.key);
    expect(
      () =>
        new EtcdCredentials({ caFile: path.join(dir, 'ca.crt'), certFile: path.join(dir, 'tls.crt'), keyFile: path.join(dir, 'tls.key') }),
    ).toThrow(/ETCD_AGENT_ETCD_CA_FILE, _CERT_FILE, _KEY_FILE .*does not belong/);
  });
});

describe('RetiringClients', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());
  const fakeClient = (): Etcd3 & { close: jest.Mock } => ({ close: jest.fn() }) as unknown as Etcd3 & { close: jest.Mock };

  it('when a client is retired unpinned, then it is closed after the grace and not before', () => {
    const retiring = new RetiringClients({ graceMs: 1000 });
    const client = fakeClient();
    retiring.retire([client]);
    jest.advanceTimersByTime(999);
    expect(client.close).not.toHaveBeenCalled();
    jest.advanceTimersByTime(1);
    expect(client.close).toHaveBeenCalledTimes(1);
    expect(retiring.pending).toBe(0);
  });

  it('when a retired client is pinned (a held lock), then it is closed when the last pin goes, after the grace', () => {
    const retiring = new RetiringClients({ graceMs: 1000, maxHoldMs: 60_000 });
    const client = fakeClient();
    const unpinA = retiring.pin(client);
    const unpinB = retiring.pin(client);
    retiring.retire([client]);
    jest.advanceTimersByTime(5000);
    unpinA();
    unpinA(); // twice releases once
    expect(client.close).not.toHaveBeenCalled();
    unpinB();
    expect(client.close).toHaveBeenCalledTimes(1);
  });

  it('when a pin is never released, then the client is closed anyway at maxHoldMs', () => {
    const retiring = new RetiringClients({ graceMs: 1000, maxHoldMs: 10_000 });
    const client = fakeClient();
    retiring.pin(client);
    retiring.retire([client]);
    jest.advanceTimersByTime(9_999);
    expect(client.close).not.toHaveBeenCalled();
    jest.advanceTimersByTime(1);
    expect(client.close).toHaveBeenCalledTimes(1);
  });

  it('when the agent shuts down, then every retired client is closed at once, exactly once', () => {
    const retiring = new RetiringClients({ graceMs: 1000 });
    const clients = [fakeClient(), fakeClient()];
    retiring.retire(clients);
    retiring.closeAll();
    jest.advanceTimersByTime(100_000);
    for (const c of clients) expect(c.close).toHaveBeenCalledTimes(1);
  });
});
