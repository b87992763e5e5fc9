/**
 * After a pod decides to bootstrap a new cluster, it keeps serving its answer until each other
 * initial member was seen deciding the same plan, or running etcd.
 *
 * Invariant: a pod that decided `new` stays visible to the other initial members while they may
 * still be asking, so each sees the plan decided (or empty) and bootstraps the same cluster rather
 * than wait on a peer gone quiet. The wait is bounded: at least `LINGER_MIN_MS`, so the last to
 * decide is seen, and at most `LINGER_MAX_MS`; then prepare goes on regardless.
 */
import { pollUntil } from '../lib/poll';
import { fetchPeerMembers } from '../etcd/peer-members';
import type { Logger } from '../observability/logger';
import { askPeers } from './answer-server';
import { BootstrapPlan, samePlan } from './decide';
import type { PrepareOptions } from './options';

/** After deciding `new`, keep answering until every initial peer was seen deciding (or running etcd), at most this long. */
const LINGER_MAX_MS = 10_000;
/** …and at least this long, so the last to decide is seen by the others. */
const LINGER_MIN_MS = 1500;
/** Pause between looks at the peers while lingering. */
const LINGER_PAUSE_MS = 250;
/** Longest wait for one peer's answer, or its etcd's peer listener, in each look. */
const PEER_LOOK_MS = 500;

/** Keeps the answer served after deciding `new`, until each initial peer was seen deciding too. */
export async function linger(opts: PrepareOptions, plan: BootstrapPlan, logger: Logger): Promise<void> {
  const started = Date.now();
  const waiting = new Set(opts.initial.map((m) => m.name).filter((n) => n !== opts.self.name));
  const allSeen = await pollUntil({ until: started + LINGER_MAX_MS, pauseMs: LINGER_PAUSE_MS }, async () => {
    const peers = opts.initial.filter((m) => waiting.has(m.name));
    const answers = await askPeers(peers, opts.config.listen.port, PEER_LOOK_MS);
    for (const [name, answer] of answers) if (answer.kind === 'bootstrap' && samePlan(answer.plan, plan)) waiting.delete(name);
    // A peer whose etcd already serves its peer listener has decided and gone on: no need to wait for it.
    await Promise.all(peers.map(async (m) => ((await peerEtcdAnswers(m.peerURL)) ? waiting.delete(m.name) : undefined)));
    return waiting.size === 0 && Date.now() - started >= LINGER_MIN_MS ? true : undefined;
  });
  if (allSeen === true) return;
  logger.info('stopped waiting for the other initial members to decide', { member: opts.self.name, notSeen: [...waiting] });
}

/**
 * Whether an etcd serves `GET <peer URL>/members` (every member does, even without a quorum). Over
 * node:http, not `fetch`: fetch refuses the Fetch standard's "bad ports" (6000, 10080, …) without
 * connecting, and a peer URL may name any port.
 */
function peerEtcdAnswers(peerURL: string): Promise<boolean> {
  return fetchPeerMembers(peerURL, PEER_LOOK_MS).then(
    () => true,
    () => false,
  );
}
