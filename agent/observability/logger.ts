/**
 * winston logger: one JSON object per line on stdout. Secrets never reach it:
 * `redact` removes them in one place, whatever field they hide in.
 */
import * as winston from 'winston';
import type { Writable } from 'node:stream';

/** The logger type every module receives through its constructor. */
export type Logger = winston.Logger;

/** Field names whose values are never logged. */
const SECRET_KEY = /authorization|token|password|passwd|secret|private.?key|cookie|credential/i;

/** Secrets that can hide inside a string value: bearer/basic credentials, URL user info, PEM private keys, key=value pairs. */
const SECRET_TEXT: ReadonlyArray<[RegExp, string]> = [
  [/-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(-----END [A-Z ]*PRIVATE KEY-----|$)/g, '[redacted private key]'],
  [/\b(Bearer|Basic)\s+[^\s,;"']+/gi, '$1 [redacted]'],
  [/\b([a-z][a-z0-9+.-]*:\/\/)[^\s/@:"']*:[^\s/@"']*@/gi, '$1[redacted]@'],
  [/\b(token|password|passwd|secret)(["']?\s*[=:]\s*["']?)[^\s,;&"'}]+/gi, '$1$2[redacted]'],
];

/** Removes secrets from free text (messages, stacks, etcd's error strings). */
export function redactText(text: string): string {
  return SECRET_TEXT.reduce((out, [pattern, replacement]) => out.replace(pattern, replacement), text);
}

/**
 * The one place secrets are removed: any secret-looking field (at any depth)
 * becomes "[redacted]", secrets inside strings are cut out, and errors are
 * reduced to their name, code, message and stack, all redacted.
 */
export function redact<T>(value: T, depth = 0): T {
  if (typeof value === 'string') return redactText(value) as unknown as T;
  if (depth > 6 || value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map((v) => redact(v, depth + 1)) as unknown as T;
  if (value instanceof Error) {
    const code = (value as NodeJS.ErrnoException).code;
    return {
      name: value.name,
      message: redactText(value.message),
      ...(code === undefined ? {} : { code: redactText(String(code)) }),
      ...(value.stack === undefined ? {} : { stack: redactText(value.stack) }),
    } as unknown as T;
  }
  if (Buffer.isBuffer(value)) return '[buffer]' as unknown as T;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    out[k] = SECRET_KEY.test(k) ? '[redacted]' : redact(v, depth + 1);
  }
  return out as T;
}

const redactFormat = winston.format((info) => {
  for (const key of Object.keys(info)) {
    if (SECRET_KEY.test(key)) info[key] = '[redacted]';
    else info[key] = redact(info[key]);
  }
  return info;
});

/** Options of `createLogger`. */
export interface LoggerOptions {
  level?: string;
  /** Where lines go; stdout by default. */
  stream?: Writable;
  silent?: boolean;
}

/** Creates a JSON-lines logger; tests pass `silent` or their own stream. */
export function createLogger(options: LoggerOptions = {}): Logger {
  return winston.createLogger({
    level: options.level ?? 'info',
    silent: options.silent ?? false,
    format: winston.format.combine(
      winston.format.timestamp(),
      winston.format.errors({ stack: true }),
      redactFormat(),
      winston.format.json(),
    ),
    transports: [new winston.transports.Stream({ stream: options.stream ?? process.stdout })],
  });
}
