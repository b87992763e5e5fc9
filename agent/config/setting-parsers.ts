/**
 * How each setting's value is read (docs/api.md §2): one parser per kind of value. A parser answers
 * the value, or throws a ConfigError naming the variable it came from, so that a bad value stops
 * start-up with one line naming its variable (exit code 2).
 */
import { parseLocation, type StoreLocation } from '../proto/store-location';
import * as os from 'node:os';
import { parseCron, type CronSchedule } from '../lib/cron';
import { unreadableFile } from './paths';
import { parseRetention, type Retention } from '../proto/maintenance';
import { isDnsSubdomain } from '../proto/names';
import { peerUrlFromTemplate, validatePeerUrl } from '../proto/urls';

/** winston's npm levels, the only ones `ETCD_AGENT_LOG_LEVEL` accepts. */
export const LOG_LEVELS = ['error', 'warn', 'info', 'http', 'verbose', 'debug', 'silly'] as const;
/** One of winston's npm levels. */
export type LogLevel = (typeof LOG_LEVELS)[number];

/** A bad configuration value; `variable` names the environment variable it came from. */
export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(`${variable}: ${message}`);
    this.name = 'ConfigError';
  }
}

/**
 * Parses a variable's value: the trimmed value (flag or environment), else the row's `default`,
 * else undefined. `env` is the process environment, for values that fall back to another variable.
 */
export type Parser<T> = (value: string | undefined, variable: string, env: NodeJS.ProcessEnv) => T;

export const text: Parser<string | undefined> = (value) => value;

export const boolean: Parser<boolean> = (value, variable) => {
  if (value !== undefined && /^(true|1|yes)$/i.test(value)) return true;
  if (value !== undefined && /^(false|0|no)$/i.test(value)) return false;
  throw new ConfigError(variable, `"${value}" is not a boolean (true or false)`);
};

export function integer(min: number, max: number): Parser<number> {
  return (value, variable) => {
    if (value === undefined || !/^\d+$/.test(value) || Number(value) < min || Number(value) > max) {
      throw new ConfigError(variable, `"${value}" must be a whole number from ${min} to ${max}`);
    }
    return Number(value);
  };
}

/** A path other processes use too (a shell script writes it): absolute, one line. */
export const absolutePath: Parser<string | undefined> = (file, variable) => {
  if (file === undefined) return undefined;
  if (!file.startsWith('/') || /[\r\n]/.test(file)) throw new ConfigError(variable, `"${file}" must be an absolute path`);
  return file;
};

export const readableFile: Parser<string | undefined> = (file, variable) => {
  if (file === undefined) return undefined;
  const why = unreadableFile(file);
  if (why !== undefined) throw new ConfigError(variable, `cannot read file ${file}: it ${why}`);
  return file;
};

export const listenAddress: Parser<{ host: string; port: number }> = (value = '', variable) => {
  const match = /^(\[[0-9a-fA-F:.]+\]|[^:[\]]*):(\d{1,5})$/.exec(value);
  const port = match ? Number(match[2]) : NaN;
  if (!match || port > 65535) {
    throw new ConfigError(variable, `"${value}" is not host:port (port 0-65535; port 0 picks a free one)`);
  }
  const host = match[1].replace(/^\[(.*)\]$/, '$1');
  return { host: host === '' ? '0.0.0.0' : host, port };
};

export const urlList: Parser<string[]> = (value = '', variable) => {
  const items = value
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (items.length === 0) throw new ConfigError(variable, 'needs at least one URL');
  return items.map((item) => {
    let url: URL;
    try {
      url = new URL(item);
    } catch {
      throw new ConfigError(variable, `"${item}" is not a URL (expected http://host:port)`);
    }
    if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.hostname === '') {
      throw new ConfigError(variable, `"${item}" must be an http or https URL with a host`);
    }
    if (url.username || url.password || (url.pathname !== '/' && url.pathname !== '') || url.search || url.hash) {
      throw new ConfigError(variable, `"${item}" must have no user, path, query or fragment`);
    }
    return `${url.protocol}//${url.host}`;
  });
};

export const memberName: Parser<string> = (value, variable, env) => {
  // An empty POD_NAME counts as unset, like an empty ETCD_AGENT_* variable.
  const name = value ?? (env.POD_NAME?.trim() || os.hostname().toLowerCase());
  if (!isDnsSubdomain(name)) throw new ConfigError(variable, `"${name}" is not a DNS-1123 subdomain`);
  return name;
};

export const peerTemplate: Parser<string | undefined> = (value, variable) => {
  if (value === undefined) return undefined;
  if (!value.includes('{name}') && !value.includes('{fqdn}')) {
    throw new ConfigError(variable, `"${value}" contains neither {name} nor {fqdn}`);
  }
  // Checked as join checks the peer URLs it makes (docs/api.md §4), so a template that can only make
  // refused URLs (a path, no port) stops start-up instead of failing every join.
  const sample = peerUrlFromTemplate(value, 'member-0');
  try {
    validatePeerUrl(sample);
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    throw new ConfigError(variable, `"${value}" must make an http or https URL with a host and an explicit port only (${why})`);
  }
  return value;
};

export const peerUrl: Parser<string | undefined> = (value, variable) => {
  if (value === undefined) return undefined;
  try {
    validatePeerUrl(value);
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    throw new ConfigError(variable, `"${value}" is not a peer URL (${why})`);
  }
  return value;
};

export const keyPrefix: Parser<string> = (value = '', variable) => {
  if (!value.startsWith('/')) throw new ConfigError(variable, `"${value}" must start with /`);
  return value.endsWith('/') ? value : `${value}/`;
};

export const logLevel: Parser<LogLevel> = (value = '', variable) => {
  const level = LOG_LEVELS.find((l) => l === value.toLowerCase());
  if (level === undefined) throw new ConfigError(variable, `"${value}" is not one of ${LOG_LEVELS.join(', ')}`);
  return level;
};

export function fraction(min: number, max: number, minOpen = false): Parser<number> {
  return (value, variable) => {
    const n = value === undefined || !/^\d*\.?\d+$/.test(value) ? NaN : Number(value);
    if (!(minOpen ? n > min : n >= min) || n > max) {
      throw new ConfigError(
        variable,
        `"${value}" must be a number ${minOpen ? 'above' : 'from'} ${min} ${minOpen ? 'and at most' : 'to'} ${max}`,
      );
    }
    return n;
  };
}

export const cronSchedule: Parser<CronSchedule | undefined> = (value, variable) => {
  if (value === undefined) return undefined;
  try {
    return parseCron(value);
  } catch (err) {
    throw new ConfigError(variable, `not a cron schedule: ${err instanceof Error ? err.message : String(err)}`);
  }
};

export const retention: Parser<Retention | undefined> = (value, variable) => {
  if (value === undefined) return undefined;
  try {
    return parseRetention(value, variable);
  } catch {
    throw new ConfigError(variable, `"${value}" is neither a number of revisions (e.g. 10000) nor a duration (e.g. 90s, 30m, 6h, 2d)`);
  }
};

/** An optional whole number from `min` to `max`. */
export function optionalInteger(min: number, max: number): Parser<number | undefined> {
  const parse = integer(min, max);
  return (value, variable, env) => (value === undefined ? undefined : parse(value, variable, env));
}

/** An optional duration (`90s`, `30m`, `6h`, `7d`), in seconds. */
export const durationSeconds: Parser<number | undefined> = (value, variable) => {
  if (value === undefined) return undefined;
  const match = /^(\d{1,9})([smhd])$/.exec(value.trim());
  if (match === null || Number(match[1]) < 1) throw new ConfigError(variable, `"${value}" is not a duration (e.g. 90s, 30m, 6h, 7d)`);
  return Number(match[1]) * { s: 1, m: 60, h: 3600, d: 86_400 }[match[2] as 's' | 'm' | 'h' | 'd'];
};

/** A backup store URL (proto/store-location.ts). */
export const storeLocation: Parser<StoreLocation | undefined> = (value, variable) => {
  if (value === undefined) return undefined;
  try {
    return parseLocation(value, variable);
  } catch (err) {
    throw new ConfigError(variable, err instanceof Error ? err.message.replace(`${variable}: `, '') : String(err));
  }
};

/** A program: an absolute path, or a bare name looked up on PATH. */
export const program: Parser<string | undefined> = (value, variable) => {
  if (value === undefined) return undefined;
  if (!/^(\/[^\s]*|[A-Za-z0-9._-]+)$/.test(value))
    throw new ConfigError(variable, `"${value}" must be an absolute path or a program name on PATH`);
  return value;
};
