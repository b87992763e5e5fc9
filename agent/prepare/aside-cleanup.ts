/**
 * Removes the data directories moved aside beside this pod's data directory once aside-decision.ts
 * says they are no longer needed, with one `warn` line for each one removed and one `info` line
 * naming those kept and why. prepare runs it after it has written etcd's start flags (run.ts), so at
 * each start of the pod (the sidecar mounts etcd's volume read-only). It never fails prepare: a
 * directory that cannot be read or removed is logged and left for the next start.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { readDataDir } from '../etcd-data/data-dir';
import type { EtcdCluster } from '../etcd/cluster-client';
import { Deadline } from '../lib/deadline';
import type { Logger } from '../observability/logger';
import type { MemberList } from '../proto/types';
import { decideAsides, isVoterAgain, parseAside, type Aside, type AsideVerdict } from './aside-decision';
import type { PrepareOptions } from './options';

/** How long the member list read may take: without an answer the member does not count as a voter again. */
const LIST_TIMEOUT_MS = 3000;

/** Reads whether this pod's member is a voter again (only when something lies aside), then removes what the rule says. */
export async function cleanUpAsides(opts: PrepareOptions, cluster: EtcdCluster, logger: Logger): Promise<void> {
  try {
    if (listAsides(opts.dataDir).length === 0) return;
    const list: MemberList | undefined = await cluster.listMembers(Deadline.in(LIST_TIMEOUT_MS)).catch(() => undefined);
    removeStaleAsides(opts.dataDir, isVoterAgain(readDataDir(opts.dataDir), list), logger, opts.self.name);
  } catch (err) {
    logger.warn('could not look at the data directories moved aside; they are looked at again at the next start', {
      member: opts.self.name,
      error: err instanceof Error ? err.message : String(err),
    });
  }
}

/** Removes the directories moved aside beside `dataDir` that the rule no longer keeps; answers every verdict. */
export function removeStaleAsides(dataDir: string, voterAgain: boolean, logger: Logger, member: string, now = new Date()): AsideVerdict[] {
  const parent = path.dirname(dataDir);
  const verdicts = decideAsides({ asides: listAsides(dataDir), nowMs: now.getTime(), voterAgain });
  const kept: Array<{ path: string; why: string }> = [];
  for (const v of verdicts) {
    const target = path.join(parent, v.name);
    if (v.action === 'keep') {
      kept.push({ path: target, why: v.why });
      continue;
    }
    try {
      fs.rmSync(target, { recursive: true, force: true });
      logger.warn('removed a data directory moved aside earlier', { member, path: target, why: v.why });
    } catch (err) {
      logger.warn('could not remove a data directory moved aside earlier', {
        member,
        path: target,
        error: err instanceof Error ? err.message : String(err),
      });
    }
  }
  if (kept.length > 0) logger.info('kept data directories moved aside', { member, kept });
  return verdicts;
}

/** The directories beside `dataDir` with the names moveAside gives (a file or a link of such a name is not one). */
function listAsides(dataDir: string): Aside[] {
  const parent = path.dirname(dataDir);
  let entries: string[];
  try {
    entries = fs.readdirSync(parent);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  return entries.flatMap((entry) => {
    const aside = parseAside(path.basename(dataDir), entry);
    if (aside === undefined) return [];
    return fs.lstatSync(path.join(parent, entry)).isDirectory() ? [aside] : [];
  });
}
