/**
 * HTTPS for the agent (CONTRACT §2 `ETCD_AGENT_TLS_*`): the server's secure
 * context from PEM files, and a poller that swaps in a new context when the
 * files change (a rotated Kubernetes Secret is an atomic symlink swap, so the
 * certificate, key and CA change together).
 */
import * as fs from 'node:fs';
import * as tls from 'node:tls';
import { X509Certificate } from 'node:crypto';
import type { Config } from '../config';
import type { Logger } from '../observability/logger';

/** The PEM files of the agent's own HTTPS endpoint; with `clientCaFile`, clients must show a certificate it signed. */
export interface TlsFiles {
  certFile: string;
  keyFile: string;
  clientCaFile?: string;
}

/** The TLS files of `config`, or undefined when the agent serves plain HTTP. */
export function tlsFilesOf(config: Partial<Pick<Config, 'tlsCertFile' | 'tlsKeyFile' | 'tlsClientCaFile'>>): TlsFiles | undefined {
  if (config.tlsCertFile === undefined || config.tlsKeyFile === undefined) return undefined;
  return { certFile: config.tlsCertFile, keyFile: config.tlsKeyFile, clientCaFile: config.tlsClientCaFile };
}

/** Reads the files into secure-context options; throws when the pair does not load (e.g. key and certificate differ). */
export function readSecureContext(files: TlsFiles): tls.SecureContextOptions {
  const options: tls.SecureContextOptions = {
    cert: fs.readFileSync(files.certFile),
    key: fs.readFileSync(files.keyFile),
    ...(files.clientCaFile === undefined ? {} : { ca: fs.readFileSync(files.clientCaFile) }),
    minVersion: 'TLSv1.2',
  };
  // Loading it here surfaces a mismatched or half-written pair before it is installed.
  tls.createSecureContext(options);
  return options;
}

/** Server options for `https.createServer`: the context, plus mutual TLS when a client CA is set. */
export function httpsServerOptions(files: TlsFiles): tls.TlsOptions {
  const mutual = files.clientCaFile !== undefined;
  // With a client CA, a caller without a certificate signed by it is refused during the handshake.
  return { ...readSecureContext(files), requestCert: mutual, rejectUnauthorized: mutual };
}

/** A short description of a certificate for logs (never the key). */
export function describeCertificate(pem: Buffer | string): { subject: string; validTo: string; fingerprint256: string } {
  const cert = new X509Certificate(pem);
  return { subject: cert.subject.replace(/\n/g, ', '), validTo: cert.validTo, fingerprint256: cert.fingerprint256 };
}

/** Polls the TLS files and installs a new secure context when any of them changes. */
export class TlsReloader {
  private timer?: NodeJS.Timeout;
  private current: string;
  private lastFailure?: string;

  constructor(
    private readonly files: TlsFiles,
    private readonly install: (options: tls.SecureContextOptions) => void,
    private readonly logger?: Logger,
    private readonly intervalMs = 1000,
  ) {
    this.current = this.fingerprint();
  }

  /** Starts polling; the timer never keeps the process alive. */
  start(): void {
    if (this.timer !== undefined) return;
    this.timer = setInterval(() => this.check(), this.intervalMs);
    this.timer.unref();
  }

  /** Stops polling. */
  stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Reloads now if the files changed; answers whether a new context was installed. */
  check(): boolean {
    const seen = this.fingerprint();
    if (seen === this.current) return false;
    let options: tls.SecureContextOptions;
    try {
      options = readSecureContext(this.files);
    } catch (err) {
      // A half-rotated pair (new certificate, old key) fails to load; keep serving the old one and try again.
      if (this.lastFailure !== seen) {
        this.lastFailure = seen;
        this.logger?.warn('tls files changed but do not load; keeping the previous certificate', {
          certFile: this.files.certFile,
          error: err instanceof Error ? err.message.split('\n')[0] : String(err),
        });
      }
      return false;
    }
    this.install(options);
    this.current = seen;
    this.lastFailure = undefined;
    this.logger?.info('tls certificate reloaded', {
      certFile: this.files.certFile,
      ...safeDescribe(options.cert as Buffer),
    });
    return true;
  }

  /** Identity of the files' current contents: inode, size and times of each, following symlinks. */
  private fingerprint(): string {
    return [this.files.certFile, this.files.keyFile, this.files.clientCaFile]
      .filter((f): f is string => f !== undefined)
      .map((f) => {
        try {
          const s = fs.statSync(f);
          return `${s.dev}:${s.ino}:${s.size}:${s.mtimeMs}:${s.ctimeMs}`;
        } catch {
          return 'missing';
        }
      })
      .join('|');
  }
}

function safeDescribe(pem: Buffer): Record<string, string> {
  try {
    return describeCertificate(pem);
  } catch {
    return {};
  }
}
