/**
 * POST /v1/members/join (docs/api.md §4): make `name` a voting member, whatever
 * state an earlier attempt left behind. Read the member list, decide
 * (join-decision.ts), and under the lock read again, decide again and send at
 * most the one RPC the decision names:
 *
 *   no matching member          → MemberAdd (learner first)       202 added
 *   matching, unstarted         → nothing                         202 in-progress
 *   matching learner, behind    → nothing                         202 in-progress
 *   matching learner, in sync   → MemberPromote                   200 promoted
 *   matching started voter      → nothing                         200 already-member
 *
 * The answer of a lost MemberAdd (the KubeBlocks incident: "member already
 * exists" forever) is found again by the next read, not remembered.
 */
import { etcdRefusal, isShuttingDown } from '../etcd/errors';
import { isAgentError } from '../proto/errors';
import { pollUntil } from '../lib/poll';
import type { JoinRequest } from '../proto/requests';
import type { ActionResult } from '../proto/types';
import { addedAnswer, decideJoin, type JoinWanted } from './join-decision';
import { requestedPeerURLs } from './match';
import { promoteLearner, retryOnVanished } from './promote';
import type { ActionRun } from './run';

/** Pause of `wait: true` polling after a pass, doubled per refusal in a row up to `WAIT_POLL_MAX_MS`. */
const WAIT_POLL_MS = 200;
/** Longest pause of `wait: true` polling: a refusal that lasts seconds costs a few RPCs, not dozens. */
const WAIT_POLL_MAX_MS = 1600;
/** Time kept back at the end of a `wait: true` call to answer with the last row reached. */
const WAIT_RESERVE_MS = 1000;
/** How far into the next second a join adds again after etcd 3.4's id collision, so that etcd's clock is past that second too. */
const NEXT_SECOND_MARGIN_MS = 50;

/** One pass: read, decide, and (under the lock, after reading again) act. */
function joinOnce(run: ActionRun, wanted: JoinWanted): Promise<ActionResult> {
  return run.perform((list, probe) => decideJoin(wanted, list, probe, run.sent), {
    intent: () => ({ name: wanted.name, peerURLs: wanted.peerURLs }),
    act: async (held, list, decision) => {
      if (decision.kind === 'promote') return promoteLearner(run, held, list, decision.member);
      const add = () =>
        run.send(held, 'add', { name: wanted.name, peerURLs: wanted.peerURLs }, () =>
          run.deps.cluster.addMember(wanted.peerURLs, wanted.learner, run.deadline),
        );
      const added = await add().catch(async (err: unknown) => {
        // etcd 3.4 derives a new member's id from its peer URLs and the current second, and refuses
        // an id it removed before as "member not found": a join right after a leave of the same
        // peer URLs, within the same second, collides. Nothing was added; the next second gives a
        // new id (etcd server/etcdserver/api/membership/member.go computeMemberId).
        if (etcdRefusal(err) !== 'member-not-found') throw err;
        await run.deadline.sleep(1000 + NEXT_SECOND_MARGIN_MS - (Date.now() % 1000), 'waiting for etcd to give the new member another id');
        return add();
      });
      return addedAnswer(list, added);
    },
    // "Peer URLs already exists" right after a read that did not show them: the read was older than
    // the add (etcd 3.4 serves the member list from the member asked). Read again and decide again.
    alsoRetry: (err, attempt) => retryOnVanished(err, attempt) || (attempt <= 3 && etcdRefusal(err) === 'peer-url-exists'),
  });
}

/**
 * Makes `req.name` a voting member. With `wait: true`, repeats the pass inside the deadline until
 * the member is a started voter, also through retryable refusals (`busy`, `unsafe`, `unavailable`),
 * and answers the last row reached: a deadline met while waiting answers the last outcome found
 * (e.g. 202 in-progress), not a `timeout` error; only when no pass found one does the last refusal
 * answer.
 */
export async function join(run: ActionRun, req: JoinRequest): Promise<ActionResult> {
  const wanted: JoinWanted = {
    name: req.name,
    peerURLs: requestedPeerURLs(run.deps.config, req.name, req.peerURLs),
    // An explicit `learner` wins; otherwise ETCD_AGENT_LEARNER_FIRST decides.
    learner: req.learner ?? run.deps.config.learnerFirst,
  };
  if (req.wait !== true) return joinOnce(run, wanted);

  let last: ActionResult | undefined;
  let lastError: unknown;
  let refusals = 0;
  const until = run.deadline.at - WAIT_RESERVE_MS;
  const done = await pollUntil(
    {
      until,
      // Refused again: back off (up to WAIT_POLL_MAX_MS); but never past `until`: the last pass runs
      // then, so a short deadline is waited out to its end, not given up early on a backoff that
      // would not fit in what is left of it.
      pauseMs: () => Math.max(0, Math.min(WAIT_POLL_MS * 2 ** Math.min(refusals, 3), WAIT_POLL_MAX_MS, until - Date.now())),
    },
    async () => {
      try {
        last = await joinOnce(run, wanted);
        lastError = undefined;
        refusals = 0;
        return last.complete ? last : undefined;
      } catch (err) {
        // Refusals that time can lift (another learner or change first, etcd's "unhealthy cluster" in
        // the 5 s after a member connected, a lost quorum) are waited out; the others answer now.
        if (!isAgentError(err) || !err.retryable || isShuttingDown(err)) throw err;
        refusals++;
        lastError = err;
        return undefined;
      }
    },
  );
  if (done !== undefined) return done;
  if (last === undefined) throw lastError;
  return { ...last, durationMs: run.elapsedMs() };
}
