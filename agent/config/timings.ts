/**
 * The timings the design fixes that more than one module shares, or that bound the contract, each
 * with why it has its value. Settings a user may change are in settings.ts instead.
 *
 * The rule: every timing is a named constant with a one-line doc of why it has its value, either
 * here or, when one rule alone uses it, beside that rule in its own module; no timeout, deadline,
 * pause or interval is written as a bare number where it is used. Invariant: every value here stays
 * inside the contract's bounds (a call's deadline at most 60 s, proto/kbagent.ts
 * `MAX_TIMEOUT_SECONDS`, which lives in proto since proto imports nothing above it; a stop within 5 s).
 */

// ── Stopping (docs/api.md §2: a stop within 5 s) ────────────────────────────────

/** How long a stop may take in all, a margin below the contract's 5 s. */
export const SHUTDOWN_BUDGET_MS = 4700;
/** The end of the stop budget kept for releasing locks and closing etcd connections (in-flight calls get the rest). */
export const SHUTDOWN_CLOSE_RESERVE_MS = 1500;
/** After the last answer, how long the process lets its log lines drain before it exits. */
export const EXIT_DRAIN_MS = 50;

// ── HTTP server (server/listen.ts) ───────────────────────────────────────────

/** A whole request must arrive within this (a 64 KiB body arrives in well under it). */
export const REQUEST_TIMEOUT_MS = 15_000;
/** Headers must arrive within this (or the request timeout, if shorter). */
export const HEADERS_TIMEOUT_MS = 10_000;
/**
 * An idle keep-alive connection is closed after this: longer than the idle timeout of kbagent's
 * HTTP action client (90 s), so the client closes idle connections, not the agent. A request the
 * client sends on a connection the server is closing fails with EOF, and Go does not send a POST
 * again.
 */
export const KEEP_ALIVE_TIMEOUT_MS = 100_000;
/** How often Node checks connections against the timeouts above (or the request timeout, if shorter). */
export const CONNECTIONS_CHECK_INTERVAL_MS = 1000;
/** `Listening.close()`'s default wait for in-flight requests before closing every connection. */
export const CLOSE_GRACE_MS = 5000;

// ── Files watched for rotation ───────────────────────────────────────────────

/** How often watched certificate, key and token files are looked at for a change. */
export const FILE_CHECK_INTERVAL_MS = 1000;
/** The longest a retired etcd client pinned by a call stays open (longer than the longest call deadline, 60 s). */
export const RETIRED_CLIENT_MAX_HOLD_MS = 70_000;

// ── Membership lock (etcd/lock.ts, held-lock.ts) ───────────────────────────

/** Time kept back from the call's deadline for the work done under the lock. */
export const LOCK_RESERVE_MS = 1000;
/**
 * Longest single attempt of a lock call. Each call goes to one endpoint; a frozen member (SIGSTOP,
 * a hung node) accepts the connection and never answers, so a short attempt followed by another
 * (on another endpoint) beats one long wait. A lock call on a working etcd takes milliseconds.
 */
export const LOCK_ATTEMPT_MS = 1000;
/** Default TTL of the lock's lease: a crashed holder's lock lapses after this. */
export const LOCK_TTL_SECONDS = 10;
/** Default longest wait for a lock another operation holds. */
export const LOCK_MAX_WAIT_MS = 5000;
/** Default interval between looks at a held lock. */
export const LOCK_POLL_MS = 100;
/** Revoking a lease: a few quick attempts, this long at most, whatever the call's deadline. */
export const LEASE_REVOKE_MS = 3000;

// ── Command line client (cli/commands.ts) ────────────────────────────────────

/** The deadline a client command gives a read (GET) that names none. */
export const CLI_READ_SECONDS = 10;
/** The deadline a client command gives a change that names none: the longest a call may ask for. */
export const CLI_CHANGE_SECONDS = 60;
/** Beyond the call's deadline, how long the client waits, so the agent can say itself that it ran out. */
export const CLI_ANSWER_MARGIN_SECONDS = 5;
/** `defragment --wait`: the pause before calling again after an `in-progress` answer (each call itself waits up to its deadline). */
export const CLI_WAIT_AGAIN_MS = 1000;

// ── Maintenance: defragmentation (maintenance/) ─────────────────────────────

/**
 * Deadline of one member's Defragment RPC. etcd copies the whole database while the member serves
 * nothing; ten minutes covers an 8 GiB database (etcd's largest recommended quota) copied at as
 * little as 14 MB/s, a slow disk. etcd goes on defragmenting after the client gives up, which the
 * run waits out (etcd_disk_defrag_inflight).
 */
export const DEFRAG_MEMBER_TIMEOUT_MS = 600_000;
/** Pause between two looks while a run waits (a member defragmenting, or catching up after its turn). */
export const DEFRAG_WAIT_POLL_MS = 250;
/** A member just defragmented must have applied its backlog within this, or the run stops (unavailable). */
export const DEFRAG_CATCH_UP_MAX_MS = 120_000;
/**
 * A voter must finish a run's compaction, and commit it, within this of the last look that found it
 * further on (a commit, or the compaction done), or the run stops (unavailable, call again).
 */
export const DEFRAG_COMPACTION_SETTLE_MAX_MS = 120_000;
/**
 * Deadline of a member's Status call in a run: longer than `ETCD_AGENT_STATUS_TIMEOUT_MS` (which keeps
 * /v1/health's answers fresh), because a run can wait and a busy member's etcd answers late; a
 * member that is defragmenting does not answer at all, and is recognised by its own gauge instead.
 */
export const DEFRAG_STATUS_TIMEOUT_MS = 2000;
/**
 * A run refuses (or stops) for an unhealthy cluster only once the looks have found it so for this
 * long: one slow Status is not a cluster that cannot spare a member.
 */
export const DEFRAG_UNHEALTHY_CONFIRM_MS = 5000;
/** Deadline of one read of a member's own /metrics page (about 170 KB). */
export const DEFRAG_METRICS_TIMEOUT_MS = 2000;
/** Deadline of each etcd read or write of a run (member list, alarms, the record, a compaction's answer). */
export const DEFRAG_STEP_TIMEOUT_MS = 30_000;
/** How long a leadership move of a run may take in all (MoveLeader and the successor taking over). */
export const DEFRAG_MOVE_LEADER_MS = 15_000;
/** The quota gauges (etcd_agent_member_db_quota_bytes) are read again at a scrape at most this often. */
export const QUOTA_REFRESH_MS = 300_000;

// ── Recovery: the record a recovery leaves in etcd (recovery/) ──────────────

/** A record read that an answer waits on: a quorum read of a cluster that may have just formed, so longer than a Status. */
export const RECOVERY_RECORD_READ_MS = 2000;
/** One record read or write in a loop that tries again: below the rejoin watch's 2 s period, so an unwritable cluster costs one try. */
export const RECOVERY_RECORD_ATTEMPT_MS = 1500;
