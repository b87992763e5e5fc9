/**
 * How backups lie in a store: each under its own name, `<name>/snapshot.db` written first and
 * `<name>/manifest.json` beside it once the snapshot is whole. A backup is the pair: a snapshot
 * without a manifest is a killed run's, never listed, and removed by retention once old enough. Names
 * sort by time (`20261204T230000.123Z-1a2b3c`), so the newest is the last. Pure but for `readBackups`.
 */
import { randomBytes } from 'node:crypto';
import { manifestSchema, type BackupEntry, type Manifest, type VerificationState } from '../proto/backup';
import type { BackupStore, StoredObject } from './store';

/** The snapshot object's key. */
export function snapshotKey(name: string): string {
  return `${name}/snapshot.db`;
}

/** The manifest object's key. */
export function manifestKey(name: string): string {
  return `${name}/manifest.json`;
}

const NAME = /^\d{8}T\d{6}\.\d{3}Z-[0-9a-f]{6}$/;

/** A new backup's name: its start time in UTC and 6 random hex digits. */
export function newBackupName(at: Date): string {
  return `${at.toISOString().replace(/[-:]/g, '')}-${randomBytes(3).toString('hex')}`;
}

/** True for a name `newBackupName` makes (what a restore or verify request may name). */
export function isBackupName(name: string): boolean {
  return NAME.test(name);
}

/** What a listing holds, sorted into backups: whole pairs, and snapshots without a manifest. */
export interface Listing {
  /** Names with both objects, oldest first. */
  paired: { name: string; snapshot: StoredObject }[];
  /**
   * Objects without their partner, oldest first: a snapshot without a manifest (a killed run's, or one
   * writing its manifest now), or a manifest without a snapshot (a verification that overlapped its
   * backup's removal, verify.ts).
   */
  orphans: StoredObject[];
}

/** Sorts a store's objects into pairs and orphans by name. Pure. */
export function sortListing(objects: StoredObject[]): Listing {
  const snapshots = new Map<string, StoredObject>();
  const manifests = new Map<string, StoredObject>();
  for (const o of objects) {
    const slash = o.key.indexOf('/');
    const name = o.key.slice(0, slash);
    if (slash < 0 || !isBackupName(name)) continue;
    if (o.key === snapshotKey(name)) snapshots.set(name, o);
    else if (o.key === manifestKey(name)) manifests.set(name, o);
  }
  const names = [...snapshots.keys()].sort();
  const lone = [...manifests.keys()].filter((n) => !snapshots.has(n));
  return {
    paired: names.filter((n) => manifests.has(n)).map((name) => ({ name, snapshot: snapshots.get(name) as StoredObject })),
    orphans: [
      ...names.filter((n) => !manifests.has(n)).map((n) => snapshots.get(n) as StoredObject),
      ...lone.map((n) => manifests.get(n) as StoredObject),
    ].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0)),
  };
}

/** Where a backup stands from its manifest's verification record. Pure. */
export function verificationState(manifest: Manifest): VerificationState {
  if (manifest.verification === undefined) return 'unverified';
  return manifest.verification.ok ? 'verified' : 'failed';
}

/** A manifest's bytes, or why they are not one (invalid JSON, a missing field, another backup's). */
export function parseManifest(bytes: Buffer, name: string): Manifest | string {
  let json: unknown;
  try {
    json = JSON.parse(bytes.toString('utf8'));
  } catch (err) {
    return `its manifest is not JSON (${(err as Error).message})`;
  }
  const parsed = manifestSchema.safeParse(json);
  if (!parsed.success) return `its manifest is not one: ${parsed.error.issues.map((i) => `${i.path.join('.')} ${i.message}`).join('; ')}`;
  if (parsed.data.name !== name) return `its manifest names another backup (${parsed.data.name})`;
  return parsed.data;
}

/** The manifest's bytes as they are stored. */
export function manifestBytes(manifest: Manifest): Buffer {
  return Buffer.from(`${JSON.stringify(manifest, null, 2)}\n`);
}

/** The store's backups, oldest first, and what was not one (a manifest unreadable, a size that differs). */
export interface Backups {
  entries: BackupEntry[];
  /** Pairs that are not a backup, with why; never restored, never counted as the newest. */
  broken: { name: string; why: string }[];
  listing: Listing;
}

/** Lists the store and reads every pair's manifest. */
export async function readBackups(store: BackupStore): Promise<Backups> {
  const listing = sortListing(await store.list(''));
  const entries: BackupEntry[] = [];
  const broken: { name: string; why: string }[] = [];
  for (const { name, snapshot } of listing.paired) {
    const bytes = await store.read(manifestKey(name));
    // Retention removes the manifest first: a manifest gone since the listing is a backup removed.
    if (bytes === undefined) continue;
    const manifest = parseManifest(bytes, name);
    if (typeof manifest === 'string') broken.push({ name, why: manifest });
    else if (manifest.sizeBytes !== snapshot.sizeBytes)
      broken.push({ name, why: `its snapshot holds ${snapshot.sizeBytes} bytes, its manifest says ${manifest.sizeBytes}` });
    else entries.push({ name, state: verificationState(manifest), manifest });
  }
  return { entries, broken, listing };
}
