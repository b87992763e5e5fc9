import { summarize } from '../../agent/cli/answer-text';
import { parseCommand, UsageError } from '../../agent/cli/command-line';
import { EXIT, exitCodeFor, requestFor, waitAgain } from '../../agent/cli/commands';

describe('CLI argument parsing (docs/api.md §7)', () => {
  it.each([
    ['join', ['etcd-3'], { method: 'POST', path: '/v1/members/join', body: { name: 'etcd-3' } }],
    [
      'join',
      ['etcd-3', '--peer-url', 'http://etcd-3:2380', '--wait', '--timeout-seconds', '5'],
      {
        method: 'POST',
        path: '/v1/members/join',
        body: { name: 'etcd-3', peerURLs: ['http://etcd-3:2380'], wait: true, timeoutSeconds: 5 },
      },
    ],
    ['leave', ['etcd-3', '--force'], { method: 'POST', path: '/v1/members/leave', body: { name: 'etcd-3', force: true } }],
    ['promote', ['etcd-3'], { method: 'POST', path: '/v1/members/promote', body: { name: 'etcd-3' } }],
    ['transfer-leader', [], { method: 'POST', path: '/v1/leader/transfer', body: {} }],
    ['transfer-leader', ['--to', 'etcd-1'], { method: 'POST', path: '/v1/leader/transfer', body: { to: 'etcd-1' } }],
    ['members', [], { method: 'GET', path: '/v1/members' }],
    ['health', ['--json'], { method: 'GET', path: '/v1/health' }],
    ['defragment', [], { method: 'POST', path: '/v1/maintenance/defragment', body: {} }],
    [
      'defragment',
      ['--compact-retain', '1000', '--min-fragmentation', '0.2', '--min-db-size', '0', '--force', '--timeout-seconds', '60'],
      {
        method: 'POST',
        path: '/v1/maintenance/defragment',
        body: { compact: { retainRevisions: 1000 }, minFragmentation: 0.2, minDbSizeBytes: 0, force: true, timeoutSeconds: 60 },
      },
    ],
    [
      'defragment',
      ['--compact-retain', '6h'],
      { method: 'POST', path: '/v1/maintenance/defragment', body: { compact: { retainSeconds: 21600 } } },
    ],
    ['defragment', ['--no-compact', '--wait'], { method: 'POST', path: '/v1/maintenance/defragment', body: { compact: false } }],
    ['defragment', ['--compact-retain', 'none'], { method: 'POST', path: '/v1/maintenance/defragment', body: { compact: false } }],
    ['backup', [], { method: 'POST', path: '/v1/backups', body: {} }],
    [
      'backup',
      ['--no-verify', '--timeout-seconds', '60'],
      { method: 'POST', path: '/v1/backups', body: { verify: false, timeoutSeconds: 60 } },
    ],
    ['backups', [], { method: 'GET', path: '/v1/backups' }],
  ] as const)('when %s %j is parsed, then it calls %j', (command, argv, expected) => {
    expect(requestFor(parseCommand(command, [...argv]))).toEqual(expected);
  });

  it.each([
    ['join', [], /exactly one member NAME/],
    ['join', ['a', 'b'], /exactly one member NAME/],
    ['members', ['x'], /takes no argument/],
    ['leave', ['etcd-3', '--wait'], /does not take --wait/],
    ['join', ['etcd-3', '--force'], /does not take --force/],
    ['join', ['etcd-3', '--bogus'], /Unknown option/],
    ['join', ['etcd-3', '--timeout-seconds', '61'], /from 1 to 60/],
    ['join', ['etcd-3', '--timeout-seconds', '1.5'], /from 1 to 60/],
    ['members', ['--agent', 'ftp://x'], /not http/],
    ['defragment', ['--compact-retain', '0'], /--compact-retain: "0" is neither a number of revisions/],
    ['defragment', ['--compact-retain', '5w'], /neither a number of revisions/],
    ['defragment', ['--compact-retain', '10', '--no-compact'], /exclude each other/],
    ['defragment', ['--min-fragmentation', '0'], /above 0 and at most 1/],
    ['defragment', ['--min-fragmentation', '1.5'], /above 0 and at most 1/],
    ['defragment', ['--min-db-size=-1'], /whole number of bytes/],
    ['defragment', ['--min-db-size', '1e6'], /whole number of bytes/],
    ['defragment', ['etcd-0'], /takes no argument/],
    ['join', ['etcd-3', '--compact-retain', '10'], /does not take --compact-retain/],
    ['backup', ['etcd-0'], /takes no argument/],
    ['backups', ['--no-verify'], /does not take --no-verify/],
    ['defragment', ['--no-verify'], /does not take --no-verify/],
  ] as const)('when %s %j is parsed, then it is a usage error (%s)', (command, argv, message) => {
    expect(() => parseCommand(command, [...argv])).toThrow(UsageError);
    expect(() => parseCommand(command, [...argv])).toThrow(message);
  });

  it('when no --agent is given, then ETCD_AGENT_URL, else the default, names the agent; ETCD_AGENT_TOKEN_FILE the token', () => {
    expect(parseCommand('members', []).agent).toBe('http://127.0.0.1:3501');
    const fromEnv = parseCommand('members', [], { ETCD_AGENT_URL: 'http://10.0.0.1:3501', ETCD_AGENT_TOKEN_FILE: '/t' });
    expect(fromEnv).toMatchObject({ agent: 'http://10.0.0.1:3501', tokenFile: '/t' });
    const flags = parseCommand('members', ['--agent', 'http://h:1', '--token-file', '/u'], { ETCD_AGENT_URL: 'http://x:2' });
    expect(flags).toMatchObject({ agent: 'http://h:1', tokenFile: '/u' });
  });
});

describe('CLI output format', () => {
  it.each<[string, string[], boolean, boolean]>([
    ['stdout is not a terminal', [], false, true],
    ['stdout is a terminal', [], true, false],
    ['--json on a terminal', ['--json'], true, true],
    ['--summary when piped', ['--summary'], false, false],
  ])('when %s, then the JSON answer is printed: %s', (_when, flags, tty, json) => {
    expect(parseCommand('members', flags, {}, tty).json).toBe(json);
  });

  it('when both --json and --summary are given, then it is a usage error', () => {
    expect(() => parseCommand('members', ['--json', '--summary'])).toThrow(UsageError);
  });
});

describe('CLI exit codes and summaries', () => {
  it.each([
    [200, { outcome: 'already-member', complete: true }, EXIT.complete],
    [200, { members: [] }, EXIT.complete],
    [200, { action: 'defragment', outcome: 'nothing-to-do', complete: true }, EXIT.complete],
    [202, { action: 'defragment', outcome: 'in-progress', complete: false }, EXIT.inProgress],
    [202, { outcome: 'added', complete: false }, EXIT.inProgress],
    [409, { error: { code: 'unsafe' } }, EXIT.refused],
    [409, { error: { code: 'busy' } }, EXIT.refused],
    [409, { error: { code: 'conflict' } }, EXIT.failed],
    [400, { error: { code: 'bad-request' } }, EXIT.failed],
    [503, { status: 'unavailable' }, EXIT.failed],
    [503, { error: { code: 'unavailable', details: { reason: 'etcd unreachable' } } }, EXIT.failed],
    [503, { error: { code: 'unavailable', details: { voters: 4, healthyVoters: 2, required: 3 } } }, EXIT.refused],
    [504, { error: { code: 'timeout' } }, EXIT.failed],
  ])('when the agent answers %i %j, then the exit code is %i', (status, body, exit) => {
    expect(exitCodeFor({ status, body })).toBe(exit);
  });

  it.each([
    ['join', { outcome: 'added', complete: false, phase: 'unstarted' }, 'etcd-3: added (unstarted, not complete: call again)'],
    ['join', { outcome: 'promoted', complete: true, phase: 'voter' }, 'etcd-3: promoted (voter, complete)'],
    ['leave', { outcome: 'removed', complete: true, leaderTransferred: true }, 'etcd-3: removed (leadership moved away first)'],
    ['leave', { outcome: 'already-absent', complete: true }, 'etcd-3: already-absent'],
    ['transfer-leader', { outcome: 'transferred', leader: { id: 'a', name: 'etcd-1' } }, 'transferred (leader: etcd-1)'],
    [
      'defragment',
      { outcome: 'in-progress', run: { agent: 'etcd-0', step: 'defragmenting etcd-1 (1 of the members to do)' }, members: [] },
      'in progress in the agent of etcd-0: defragmenting etcd-1 (1 of the members to do) (call again)',
    ],
    [
      'defragment',
      {
        outcome: 'defragmented',
        alarm: { noSpace: true, disarmed: true },
        members: [
          { name: 'etcd-1', before: { dbSizeBytes: 3_600_000 }, after: { dbSizeBytes: 1_800_000 }, durationMs: 40, wasLeader: false },
          { name: 'etcd-0', before: { dbSizeBytes: 3_600_000 }, after: { dbSizeBytes: 1_800_000 }, durationMs: 41, wasLeader: true },
        ],
      },
      'defragmented, NOSPACE disarmed\n  etcd-1 3.6 MB → 1.8 MB in 40 ms\n  etcd-0 (leader, after leadership moved) 3.6 MB → 1.8 MB in 41 ms',
    ],
  ] as const)('when %s answers %j, then the summary reads "%s"', (command, body, line) => {
    expect(summarize({ command, name: 'etcd-3' }, body)).toBe(line);
  });
});

describe('defragment --wait', () => {
  it.each<[number, Record<string, unknown>, boolean]>([
    [202, { outcome: 'in-progress', complete: false }, true],
    [409, { error: { code: 'busy', details: { reason: 'nospace-runner' } } }, true],
    [409, { error: { code: 'busy' } }, true],
    [409, { error: { code: 'unsafe' } }, false],
    [200, { outcome: 'defragmented', complete: true }, false],
    [503, { error: { code: 'unavailable' } }, false],
  ])('when the agent answers %i %j, then --wait calls again: %s', (status, body, again) => {
    expect(waitAgain({ status, body })).toBe(again);
  });
});
