/**
 * HTTPS for the agent (docs/api.md §2 `ETCD_AGENT_TLS_*`): the server's secure
 * context from PEM files, and a poller that swaps in a new context when the
 * files change (a rotated Kubernetes Secret is an atomic symlink swap, so the
 * certificate, key and CA change together).
 */
import * as fs from 'node:fs';
import * as tls from 'node:tls';
import { X509Certificate } from 'node:crypto';
import type { Config } from '../config/config';
import type { Logger } from '../observability/logger';
import { FileReloader } from '../config/watched-files';
import { FILE_CHECK_INTERVAL_MS } from '../config/timings';

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

/**
 * Polls the TLS files and installs a new secure context when any of them changes: a `FileReloader`
 * (`start`, `stop`, `check`) over the certificate, the key and the client CA.
 */
export class TlsReloader extends FileReloader<tls.SecureContextOptions> {
  constructor(files: TlsFiles, install: (options: tls.SecureContextOptions) => void, logger?: Logger, intervalMs = FILE_CHECK_INTERVAL_MS) {
    super({
      files: [files.certFile, files.keyFile, ...(files.clientCaFile === undefined ? [] : [files.clientCaFile])],
      // A half-rotated pair (new certificate, old key) fails to load; the old one keeps serving.
      load: () => readSecureContext(files),
      install,
      logger,
      intervalMs,
      messages: { rejected: 'tls files changed but do not load; keeping the previous certificate', installed: 'tls certificate reloaded' },
      describe: (options) => safeDescribe(options.cert as Buffer),
    });
  }
}

function safeDescribe(pem: Buffer): Record<string, string> {
  try {
    return describeCertificate(pem);
  } catch {
    return {};
  }
}
