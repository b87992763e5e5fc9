/**
 * Request bodies of the mutating v1 calls (docs/api.md §4), as zod schemas. Every
 * schema is strict: an unknown field is a `bad-request`, so a typo such as
 * `"froce": true` is refused instead of silently ignored.
 */
import { z } from 'zod';
import { AgentError, isAgentError } from './errors';
import { MAX_TIMEOUT_SECONDS } from './kbagent';
import { MAX_RETAIN_SECONDS } from './maintenance';
import { isValidMemberName } from './names';
import { validatePeerUrl } from './urls';

const memberName = z.string().refine(isValidMemberName, { message: 'must be a DNS-1123 subdomain of at most 253 characters' });

/** Longer than any real peer URL (a 253-character host, scheme and port), so a hostile one is not echoed back whole. */
const MAX_PEER_URL_LENGTH = 512;

/** What is wrong with the host of a valid peer URL's normal form, for hosts DNS could never resolve. */
function hostProblem(normal: string): string | undefined {
  const host = /^https?:\/\/(.*):\d+$/.exec(normal)?.[1] ?? '';
  if (host.startsWith('[')) return undefined;
  if (host.length > 253) return 'has a host longer than 253 characters';
  const labels = host.split('.');
  if (labels.some((l) => l === '')) return 'has an empty label in its host';
  if (labels.some((l) => l.length > 63)) return 'has a host label longer than 63 characters';
  return undefined;
}

const peerUrl = z.string().superRefine((value, ctx) => {
  if (value.length > MAX_PEER_URL_LENGTH) {
    ctx.addIssue({ code: z.ZodIssueCode.custom, message: `is longer than ${MAX_PEER_URL_LENGTH} characters` });
    return;
  }
  try {
    const problem = hostProblem(validatePeerUrl(value));
    if (problem !== undefined) ctx.addIssue({ code: z.ZodIssueCode.custom, message: `peer URL ${JSON.stringify(value)} ${problem}` });
  } catch (err) {
    ctx.addIssue({ code: z.ZodIssueCode.custom, message: isAgentError(err) ? err.message : 'is not a valid peer URL' });
  }
});

const peerURLs = z.array(peerUrl).min(1, 'must list at least one peer URL').max(16, 'must list at most 16 peer URLs');

const memberId = z.string().regex(/^(0x)?[0-9a-fA-F]{1,16}$/, 'must be a member id in hex, as etcdctl prints it');

const timeoutSeconds = z.number().int('must be a whole number').min(1).max(MAX_TIMEOUT_SECONDS);

/** "Answer 2xx only at the end state" (agent/proto/completion.ts); the service never sees it. */
const requireComplete = z.boolean().optional();

/** `POST /v1/members/join`. */
export const joinRequestSchema = z
  .object({
    name: memberName,
    peerURLs: peerURLs.optional(),
    learner: z.boolean().optional(),
    wait: z.boolean().optional(),
    timeoutSeconds: timeoutSeconds.optional(),
    requireComplete,
  })
  .strict();

/** `POST /v1/members/leave`: a member by `name` (optionally with `peerURLs`) or by `id`. */
export const leaveRequestSchema = z
  .object({
    name: memberName.optional(),
    peerURLs: peerURLs.optional(),
    id: memberId.optional(),
    force: z.boolean().optional(),
    timeoutSeconds: timeoutSeconds.optional(),
    requireComplete,
  })
  .strict()
  .refine((body) => body.name !== undefined || body.id !== undefined, {
    message: 'name the member to remove by name or id',
    path: ['name'],
  });

/** `POST /v1/members/promote`. */
export const promoteRequestSchema = z
  .object({
    name: memberName,
    peerURLs: peerURLs.optional(),
    id: memberId.optional(),
    timeoutSeconds: timeoutSeconds.optional(),
    requireComplete,
  })
  .strict();

/** `POST /v1/leader/transfer`: to a named voter, or `{}` for "away from this pod's member". */
export const transferRequestSchema = z
  .object({
    to: memberName.optional(),
    timeoutSeconds: timeoutSeconds.optional(),
    requireComplete,
  })
  .strict();

/** A compaction retention in a body: the last N revisions, or the last N seconds (exactly one). */
const retention = z.union([
  z.object({ retainRevisions: z.number().int('must be a whole number').min(1).max(Number.MAX_SAFE_INTEGER) }).strict(),
  z.object({ retainSeconds: z.number().int('must be a whole number').min(1).max(MAX_RETAIN_SECONDS) }).strict(),
]);

/**
 * `POST /v1/maintenance/defragment`. Every field is optional: absent, the settings
 * (`ETCD_AGENT_DEFRAG_*`) decide; `compact: false` skips a compaction the settings ask for.
 */
export const defragmentRequestSchema = z
  .object({
    minFragmentation: z.number().gt(0, 'must be above 0 (a member just defragmented is near 0)').max(1).optional(),
    minDbSizeBytes: z.number().int('must be a whole number').min(0).max(Number.MAX_SAFE_INTEGER).optional(),
    compact: z.union([z.literal(false), retention]).optional(),
    force: z.boolean().optional(),
    timeoutSeconds: timeoutSeconds.optional(),
  })
  .strict();

/** A parsed join request, as the membership service takes it. */
export type JoinRequest = Omit<z.infer<typeof joinRequestSchema>, 'requireComplete'>;
/** A parsed leave request, as the membership service takes it. */
export type LeaveRequest = Omit<z.infer<typeof leaveRequestSchema>, 'requireComplete'>;
/** A parsed promote request, as the membership service takes it. */
export type PromoteRequest = Omit<z.infer<typeof promoteRequestSchema>, 'requireComplete'>;
/** A parsed leader-transfer request, as the membership service takes it. */
export type TransferRequest = Omit<z.infer<typeof transferRequestSchema>, 'requireComplete'>;

/** A parsed defragment request. */
export type DefragmentRequest = z.infer<typeof defragmentRequestSchema>;

/** One problem of a refused body, as listed in `details.issues`. */
export interface RequestIssue {
  path: string;
  message: string;
}

/**
 * Validates `body` against `schema`; throws AgentError `bad-request` whose message names the
 * first problem and whose `details.issues` lists every one.
 */
export function parseRequest<S extends z.ZodTypeAny>(schema: S, body: unknown): z.infer<S> {
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data as z.infer<S>;
  const issues: RequestIssue[] = parsed.error.issues.map((issue) => ({
    path: issue.path.join('.'),
    message: issue.message,
  }));
  const first = issues[0];
  const message = first === undefined ? 'invalid body' : first.path === '' ? first.message : `${first.path}: ${first.message}`;
  throw new AgentError('bad-request', message, { details: { issues } });
}

/** `POST /v1/recovery`: the member to recover from, the cluster's id (as the plan shows it), and `force` to pass over a more advanced survivor. */
export const recoveryRequestSchema = z
  .object({
    from: memberName,
    clusterId: z.string().regex(/^(0x)?[0-9a-fA-F]{1,16}$/, 'must be the cluster id in hex, as GET /v1/recovery shows it'),
    force: z.boolean().optional(),
    timeoutSeconds: timeoutSeconds.optional(),
  })
  .strict();
