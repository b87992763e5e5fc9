/**
 * etcd3 is loaded on first use, not when the agent starts: loading it loads gRPC and protobufjs,
 * which parses etcd's .proto files, and that is most of a start-up's CPU. HTTP (`/readyz`) is up
 * before any etcd call is made (docs/api.md §2), so the first call that needs etcd pays for it instead.
 *
 * Invariant: code outside this file and etcd3-entry.ts imports from 'etcd3' only types (`import type`); every value
 * (the client class, error classes, `isRecoverableError`) comes through `etcd3()`.
 */
import type * as Etcd3Module from './etcd3-entry';

/** The etcd3 module's exports, and the gRPC credentials and metadata of the same copy (etcd3-entry.ts). */
export type Etcd3Exports = typeof Etcd3Module;

let loaded: Etcd3Exports | undefined;

/** etcd3, loaded now if this is its first use. */
export function etcd3(): Etcd3Exports {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded on first use, see above
  loaded ??= require('./etcd3-entry') as Etcd3Exports;
  return loaded;
}

/**
 * etcd3 when `err` may be one of its errors (its classes are named GRPC…, Etcd… or ClientClosedError),
 * else undefined. Only etcd3 makes those, so it is loaded by then and this costs nothing; an error of
 * any other kind never loads it.
 */
export function etcd3For(err: unknown): Etcd3Exports | undefined {
  return err instanceof Error && /^(GRPC|Etcd|ClientClosed)/.test(err.constructor.name) ? etcd3() : undefined;
}
