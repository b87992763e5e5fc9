/**
 * POST /v1/members/join (CONTRACT §4): make `name` a voting member, whatever
 * state an earlier attempt left behind. Read the member list, find the row of
 * the contract's table that applies, and send at most the one RPC it needs:
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
import { delay } from '../deadline';
import { isMemberNotFound, isShuttingDown } from '../etcd/errors';
import { AgentError, isAgentError } from '../proto/errors';
import type { JoinRequest } from '../proto/requests';
import type { ActionResult, Member, MemberList } from '../proto/types';
import { matchMember, toConflictError } from './match';
import { planForMember, promoteUnderLock, readyToPromote, notYet, retryOnVanished, type PromotePlan } from './promote';
import { checkVoterAdd } from './quorum';
import { ActionRun, describeMember, etcdSaid, requestedPeerURLs, requireQuorum } from './run';

/** Interval of `wait: true` polling. */
const WAIT_POLL_MS = 200;
/** Time kept back at the end of a `wait: true` call to answer with the last row reached. */
const WAIT_RESERVE_MS = 1000;

interface Wanted {
  name: string;
  peerURLs: string[];
  learner: boolean;
}

type JoinPlan = PromotePlan | { kind: 'add' };

/** Decides the contract row from a member list; throws conflict, busy or bad-request. */
function planJoin(run: ActionRun, list: MemberList, wanted: Wanted): JoinPlan {
  const found = matchMember(list.members, { name: wanted.name, peerURLs: wanted.peerURLs });
  if (found.kind === 'conflict') throw toConflictError(found);
  if (found.kind === 'match') {
    const plan = planForMember(run, list, found.member);
    // A member this very call added is still reported as `added` until it starts.
    if (plan.kind === 'answer' && plan.answer.phase === 'unstarted' && run.sent.has('add')) plan.answer.outcome = 'added';
    return plan;
  }
  if (wanted.peerURLs.length === 0) {
    throw new AgentError(
      'bad-request',
      `no peer URL for ${wanted.name}: send peerURLs or set ETCD_AGENT_PEER_URL_TEMPLATE`,
      { details: { name: wanted.name } },
    );
  }
  const learner = list.members.find((m) => m.isLearner);
  if (wanted.learner && learner !== undefined) {
    throw new AgentError(
      'busy',
      `etcd allows one learner at a time and ${describeMember(learner)} is still a learner; call again once it is promoted or removed`,
      { details: { learner } },
    );
  }
  return { kind: 'add' };
}

/** One pass over the table: read, decide, and (under the lock, after reading again) act. */
async function joinOnce(run: ActionRun, wanted: Wanted): Promise<ActionResult> {
  const list = await run.readMembers();
  const plan = planJoin(run, list, wanted);
  if (plan.kind === 'answer') return run.answer(plan.answer);
  if (plan.kind === 'promote') {
    // A learner that is clearly behind needs no lock and no RPC: answer in-progress now.
    const probe = await run.probe(list.members);
    requireQuorum(probe);
    if (!readyToPromote(probe, plan.member)) return run.answer(notYet(list, plan.member));
  }

  const intent = { action: run.action, member: { name: wanted.name, peerURLs: wanted.peerURLs } };
  return run.underLock(intent, (held) =>
    run.converge(
      async () => {
        const again = await run.readMembers();
        const next = planJoin(run, again, wanted);
        if (next.kind === 'answer') return run.answer(next.answer);
        if (next.kind === 'promote') return run.answer(await promoteUnderLock(run, held, again, next.member));

        const probe = await run.probe(again.members);
        requireQuorum(probe);
        if (!wanted.learner) {
          const verdict = checkVoterAdd({ voters: probe.voters.length, healthyVoters: probe.healthyVoters, name: wanted.name });
          if (!verdict.safe) throw new AgentError('unsafe', verdict.message, { details: verdict.details });
        }
        const add = (): Promise<Member> =>
          run.send(held, 'add', { name: wanted.name, peerURLs: wanted.peerURLs }, () =>
            run.deps.cluster.addMember(wanted.peerURLs, wanted.learner, run.deadline),
          );
        const added = await add().catch(async (err: unknown) => {
          // etcd 3.4 derives a new member's id from its peer URLs and the current second, and refuses
          // an id it removed before as "member not found": a join right after a leave of the same
          // peer URLs, within the same second, collides. Nothing was added; the next second gives a
          // new id (etcd server/etcdserver/api/membership/member.go computeMemberId).
          if (!etcdSaid(err, isMemberNotFound)) throw err;
          await run.deadline.sleep(1050 - (Date.now() % 1000), 'waiting for etcd to give the new member another id');
          return add();
        });
        return run.answer({
          outcome: 'added',
          complete: false,
          phase: 'unstarted',
          member: added,
          list: { ...again, members: [...again.members, added] },
        });
      },
      // "Peer URLs already exists" right after a read that did not show them: the read was older than
      // the add (etcd 3.4 serves the member list from the member asked). Read again and decide again.
      (err, attempt) => retryOnVanished(err, attempt) || (attempt <= 3 && etcdSaid(err, peerUrlsExist)),
    ),
  );
}

function peerUrlsExist(err: unknown): boolean {
  return err instanceof Error && err.message.includes('Peer URLs already exists');
}

/**
 * Makes `req.name` a voting member. With `wait: true`, repeats the pass every 200 ms inside the
 * deadline until the member is a started voter, also through retryable refusals (`busy`, `unsafe`,
 * `unavailable`), and answers the last row reached: a deadline met while waiting answers the last
 * outcome found (e.g. 202 in-progress), not a `timeout` error; only when no pass found one does the
 * last refusal answer.
 */
export async function join(run: ActionRun, req: JoinRequest): Promise<ActionResult> {
  const wanted: Wanted = {
    name: req.name,
    peerURLs: requestedPeerURLs(run.deps.config, req.name, req.peerURLs),
    // An explicit `learner` wins; otherwise ETCD_AGENT_LEARNER_FIRST decides.
    learner: req.learner ?? run.deps.config.learnerFirst,
  };
  if (req.wait !== true) return joinOnce(run, wanted);

  let last: ActionResult | undefined;
  let lastError: unknown;
  let refusals = 0;
  for (;;) {
    try {
      last = await joinOnce(run, wanted);
      lastError = undefined;
      refusals = 0;
      if (last.complete) return last;
    } catch (err) {
      refusals++;
      // Refusals that time can lift (another learner or change first, etcd's "unhealthy cluster" in
      // the 5 s after a member connected, a lost quorum) are waited out; the others answer now.
      if (!isAgentError(err) || !err.retryable || isShuttingDown(err)) throw err;
      lastError = err;
    }
    // Refused again: back off (to 1.6 s), so a refusal that lasts seconds costs a few RPCs, not dozens.
    const pause = Math.min(WAIT_POLL_MS * 2 ** Math.min(refusals, 3), 1600);
    if (run.deadline.remainingMs() < pause + WAIT_RESERVE_MS) break;
    await delay(pause);
  }
  if (last === undefined) throw lastError;
  return { ...last, durationMs: run.elapsedMs() };
}
