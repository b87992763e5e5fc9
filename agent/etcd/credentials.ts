/**
 * The TLS material the agent shows etcd (docs/api.md §2 `ETCD_AGENT_ETCD_CA_FILE`,
 * `_CERT_FILE`, `_KEY_FILE`), re-read when the files change: cert-manager
 * renewing them in place, or a Secret volume's `..data` symlink swap.
 *
 * Invariant: the material in use always loaded completely — every PEM block of
 * the CA file is a certificate, the certificate parses and the key is its key.
 * A half-written file or a new certificate beside the old key keeps the
 * previous material (with a warning) and is looked at again at the next
 * change; the same bytes again change nothing. Listeners hear of a change only
 * when new material is in use.
 */
import * as fs from 'node:fs';
import { createHash, createPrivateKey, X509Certificate } from 'node:crypto';
import type { Logger } from '../observability/logger';
import { FileReloader } from '../config/watched-files';

/** Where the etcd TLS material lives; a client pair is optional (etcd without `--client-cert-auth`). */
export interface EtcdTlsFiles {
  caFile: string;
  certFile?: string;
  keyFile?: string;
}

/** File contents as read, before validation. */
export interface EtcdTlsBytes {
  ca: Buffer;
  cert?: Buffer;
  key?: Buffer;
}

/** Validated material, ready for gRPC's `createSsl`, with a digest to tell one version from the next. */
export interface EtcdTlsMaterial extends EtcdTlsBytes {
  /** SHA-256 over CA, certificate and key: equal digests mean nothing changed. */
  digest: string;
  /** Subject, expiry and fingerprint of the client certificate, for logs (never the key). */
  certificate?: { subject: string; validTo: string; fingerprint256: string };
  /** Number of CA certificates trusted. */
  caCertificates: number;
}

/** The outcome of looking at newly read files: put them in use, keep the current material, or refuse them and why. */
export type CredentialsDecision =
  { action: 'swap'; material: EtcdTlsMaterial } | { action: 'unchanged' } | { action: 'reject'; reason: string };

const PEM_BLOCK = /-----BEGIN ([A-Z0-9 ]+)-----[\s\S]*?-----END \1-----/g;

/** The complete PEM blocks of `text` and whether anything but whitespace is left around them (a cut-off block). */
function pemBlocks(text: string): { blocks: Array<{ label: string; pem: string }>; leftover: boolean } {
  const blocks = [...text.matchAll(PEM_BLOCK)].map((m) => ({ label: m[1], pem: m[0] }));
  return { blocks, leftover: text.replace(PEM_BLOCK, '').trim() !== '' };
}

/**
 * Validates read bytes into material; throws an Error saying what is wrong (which file, which
 * problem). Pure: the same bytes always give the same answer.
 */
export function validateTlsBytes(bytes: EtcdTlsBytes): EtcdTlsMaterial {
  const ca = pemBlocks(bytes.ca.toString('utf8'));
  if (ca.leftover) throw new Error('the CA file holds an incomplete PEM block (being written?)');
  if (ca.blocks.length === 0) throw new Error('the CA file holds no PEM certificate');
  ca.blocks.forEach((b, i) => {
    if (b.label !== 'CERTIFICATE') throw new Error(`PEM block ${i + 1} of the CA file is a ${b.label}, not a CERTIFICATE`);
    try {
      new X509Certificate(b.pem);
    } catch (err) {
      throw new Error(`certificate ${i + 1} of the CA file does not parse: ${(err as Error).message}`);
    }
  });
  if ((bytes.cert === undefined) !== (bytes.key === undefined))
    throw new Error('a client certificate needs its key, and a key its certificate');
  let certificate: EtcdTlsMaterial['certificate'];
  if (bytes.cert !== undefined && bytes.key !== undefined) {
    const chain = pemBlocks(bytes.cert.toString('utf8'));
    if (chain.blocks.length === 0 || chain.leftover)
      throw new Error('the client certificate file is empty or holds an incomplete PEM block (being written?)');
    let leaf: X509Certificate;
    let key;
    try {
      leaf = new X509Certificate(chain.blocks[0].pem);
    } catch (err) {
      throw new Error(`the client certificate does not parse: ${(err as Error).message}`);
    }
    try {
      key = createPrivateKey(bytes.key);
    } catch (err) {
      throw new Error(`the client key does not parse (being written?): ${(err as Error).message}`);
    }
    if (!leaf.checkPrivateKey(key)) throw new Error('the client key does not belong to the client certificate (half a rotation?)');
    certificate = { subject: leaf.subject.replace(/\n/g, ', '), validTo: leaf.validTo, fingerprint256: leaf.fingerprint256 };
  }
  const digest = createHash('sha256');
  for (const part of [bytes.ca, bytes.cert, bytes.key])
    digest
      .update(String(part?.length ?? -1))
      .update(':')
      .update(part ?? '');
  return { ...bytes, digest: digest.digest('hex'), certificate, caCertificates: ca.blocks.length };
}

/**
 * The reload decision, as a pure function of the material in use and the bytes just read:
 * bytes that do not validate are rejected (the current material stays), the same bytes again
 * are `unchanged`, anything else valid is swapped in.
 */
export function decideCredentials(current: EtcdTlsMaterial | undefined, read: EtcdTlsBytes): CredentialsDecision {
  let material: EtcdTlsMaterial;
  try {
    material = validateTlsBytes(read);
  } catch (err) {
    return { action: 'reject', reason: (err as Error).message };
  }
  if (current !== undefined && current.digest === material.digest) return { action: 'unchanged' };
  return { action: 'swap', material };
}

/**
 * Why the TLS files cannot be used now (unreadable, incomplete, or a certificate and key that do
 * not belong together), or undefined when they load: start-up refuses the configuration with it.
 */
export function tlsFilesProblem(files: EtcdTlsFiles): string | undefined {
  try {
    validateTlsBytes(readTlsFiles(files));
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}

/** Reads the files as they are now (no validation). */
export function readTlsFiles(files: EtcdTlsFiles): EtcdTlsBytes {
  return {
    ca: fs.readFileSync(files.caFile),
    ...(files.certFile === undefined ? {} : { cert: fs.readFileSync(files.certFile) }),
    ...(files.keyFile === undefined ? {} : { key: fs.readFileSync(files.keyFile) }),
  };
}

/** The etcd TLS material in use, and a watcher that swaps in new material when the files change. */
export class EtcdCredentials {
  private material: EtcdTlsMaterial;
  private readonly listeners: Array<(material: EtcdTlsMaterial) => void> = [];
  private readonly reloader: FileReloader<EtcdTlsMaterial>;

  /** Loads the files now; throws, naming the variables, when they do not form valid material. */
  constructor(files: EtcdTlsFiles, options: { logger?: Logger; intervalMs?: number } = {}) {
    const watched = [files.caFile, files.certFile, files.keyFile].filter((f): f is string => f !== undefined);
    try {
      this.material = validateTlsBytes(readTlsFiles(files));
    } catch (err) {
      throw new Error(`ETCD_AGENT_ETCD_CA_FILE, _CERT_FILE, _KEY_FILE (${watched.join(', ')}): ${(err as Error).message}`);
    }
    this.reloader = new FileReloader<EtcdTlsMaterial>({
      files: watched,
      initial: this.material,
      load: () => {
        const decision = decideCredentials(this.material, readTlsFiles(files));
        if (decision.action === 'reject') throw new Error(decision.reason);
        return decision.action === 'swap' ? decision.material : this.material;
      },
      same: (a, b) => a.digest === b.digest,
      install: (material) => {
        this.material = material;
        for (const listener of this.listeners) listener(material);
      },
      logger: options.logger,
      intervalMs: options.intervalMs,
      messages: {
        rejected: 'etcd TLS files changed but do not load; keeping the previous credentials',
        installed: 'etcd TLS credentials reloaded',
      },
      describe: (m) => ({ caCertificates: m.caCertificates, ...m.certificate }),
    });
  }

  /** The material in use now. */
  current(): EtcdTlsMaterial {
    return this.material;
  }

  /** Calls `listener` each time new material is in use. */
  onChange(listener: (material: EtcdTlsMaterial) => void): void {
    this.listeners.push(listener);
  }

  /** Starts watching the files (the timer never keeps the process alive). */
  start(): void {
    this.reloader.start();
  }

  /** Stops watching. */
  stop(): void {
    this.reloader.stop();
  }

  /** Looks at the files now; answers whether new material was put in use. */
  check(): boolean {
    return this.reloader.check();
  }
}
