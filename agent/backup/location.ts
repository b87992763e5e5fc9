/**
 * Opens the backup store a location names (the URL form and its parse are in proto/store-location.ts,
 * re-exported here). The S3 SDK is loaded only when an S3 store is used.
 */
import type { StoreLocation } from '../proto/store-location';
import type { BackupStore } from './store';

export { describeLocation, parseLocation, type DirLocation, type S3Location, type StoreLocation } from '../proto/store-location';

/** Opens the store a location names, each S3 request within `timeoutSeconds` (the S3 SDK is loaded only when an S3 store is used). */
export async function openStore(location: StoreLocation, timeoutSeconds?: number): Promise<BackupStore> {
  if (location.kind === 'dir') {
    const { DirStore } = await import('./dir-store');
    return new DirStore(location.path);
  }
  const { S3Store, S3_TIMEOUTS } = await import('./s3-store');
  if (timeoutSeconds === undefined) return new S3Store(location);
  const requestMs = timeoutSeconds * 1000;
  return new S3Store(location, { connectMs: Math.min(S3_TIMEOUTS.connectMs, requestMs), requestMs });
}
