/**
 * Opens the backup store a location names (the URL form and its parse are in proto/store-location.ts,
 * re-exported here). The S3 SDK is loaded only when an S3 store is used.
 */
import type { StoreLocation } from '../proto/store-location';
import type { BackupStore } from './store';

export { describeLocation, parseLocation, type DirLocation, type S3Location, type StoreLocation } from '../proto/store-location';

/** Opens the store a location names (the S3 SDK is loaded only when an S3 store is used). */
export async function openStore(location: StoreLocation): Promise<BackupStore> {
  if (location.kind === 'dir') {
    const { DirStore } = await import('./dir-store');
    return new DirStore(location.path);
  }
  const { S3Store } = await import('./s3-store');
  return new S3Store(location);
}
