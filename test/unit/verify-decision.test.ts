import { judgeStepFailure, type StepFailure } from '../../agent/backup/verify-decision';

/** The verdict in a few words: `failed <check>`, or `could-not-run`. */
function said(f: StepFailure): string {
  const v = judgeStepFailure(f);
  return v.kind === 'failed' ? `failed ${v.check}` : 'could-not-run';
}

const BBOLT_REFUSAL = 'panic: both meta pages are invalid, meta0: invalid database, meta1: invalid database';

describe('judgeStepFailure', () => {
  it.each<[string, string, StepFailure]>([
    [
      'the scratch directory cannot be made (a read-only root file system)',
      'could-not-run',
      { step: 'scratch', errno: 'EROFS', said: "EROFS: read-only file system, mkdtemp '/tmp/etcd-backup-verify-XXXXXX'" },
    ],
    [
      'the snapshot read back fills the scratch volume',
      'could-not-run',
      { step: 'scratch', errno: 'ENOSPC', said: 'ENOSPC: no space left on device, write' },
    ],
    [
      'the scratch file cannot be read back for etcd hash',
      'could-not-run',
      { step: 'scratch', errno: 'EIO', said: 'EIO: i/o error, read' },
    ],
    ['the restore tool is not there', 'could-not-run', { step: 'restore', errno: 'ENOENT', said: 'spawn etcdutl ENOENT' }],
    ['the restore tool may not be run', 'could-not-run', { step: 'restore', errno: 'EACCES', said: 'spawn /tools/etcdutl EACCES' }],
    [
      'the restore tool is for another machine',
      'could-not-run',
      { step: 'restore', errno: 'ENOEXEC', said: 'spawn /tools/etcdutl ENOEXEC' },
    ],
    [
      "the restore tool runs out of the agent's time",
      'could-not-run',
      { step: 'restore', timedOut: true, signal: 'SIGTERM', said: 'restoring snapshot' },
    ],
    ['the restore tool is killed by the OOM killer', 'could-not-run', { step: 'restore', signal: 'SIGKILL', said: 'restoring snapshot' }],
    [
      'the restore tool finds no room in the scratch directory',
      'could-not-run',
      { step: 'restore', said: 'Error: write /tmp/etcd-backup-verify-1/data/member/snap/db: no space left on device' },
    ],
    [
      'the restore tool may not write the scratch directory',
      'could-not-run',
      { step: 'restore', said: 'Error: mkdir /tmp/etcd-backup-verify-1/data: permission denied' },
    ],
    [
      'the restore tool meets a read-only file system',
      'could-not-run',
      { step: 'restore', said: 'Error: open /tmp/x/data/member/snap/db: read-only file system' },
    ],
    ['the restore tool cannot map its memory', 'could-not-run', { step: 'restore', said: 'panic: mmap: cannot allocate memory' }],
    ['the restore tool runs out of file handles', 'could-not-run', { step: 'restore', said: 'Error: open db: too many open files' }],
    [
      'the program named is not a snapshot restore tool (etcdctl without the subcommand)',
      'could-not-run',
      { step: 'restore', said: 'Error: unknown command "restore" for "etcdctl snapshot"' },
    ],
    [
      'the program named does not know its flags',
      'could-not-run',
      { step: 'restore', said: 'Error: unknown flag: --initial-cluster-token' },
    ],
    ['the restore tool refuses the snapshot as a bbolt file', 'failed restore', { step: 'restore', said: BBOLT_REFUSAL }],
    [
      "the restore tool finds etcd's hash wrong",
      'failed restore',
      { step: 'restore', said: 'Error: expected sha256 [1 2 3], got [4 5 6]' },
    ],
    [
      'the restore tool says the snapshot is cut short',
      'failed restore',
      { step: 'restore', said: 'Error: snapshot file integrity check failed. 1024 bytes remaining, 4096 bytes expected' },
    ],
    [
      'the restore tool printed nothing but exited with an error',
      'failed restore',
      { step: 'restore', said: 'Command failed: etcdutl snapshot restore /tmp/x/snapshot.db' },
    ],
    [
      'the tool exited 0 but wrote no database (a tool that only printed its help)',
      'could-not-run',
      { step: 'read', errno: 'ENOENT', said: "ENOENT: no such file or directory, open '/tmp/x/data/member/snap/db'" },
    ],
    [
      'the restored database cannot be read for a system error',
      'could-not-run',
      { step: 'read', errno: 'EMFILE', said: 'EMFILE: too many open files' },
    ],
    [
      'the restored backend is not what etcd writes',
      'failed read',
      { step: 'read', said: 'page 12 of /tmp/x/data/member/snap/db is a leaf page where a branch was expected' },
    ],
  ])('when %s, then %s', (_case, expected, failure) => {
    expect(said(failure)).toBe(expected);
  });

  it('when the verification could not run, then its reason keeps what the tool or the system said', () => {
    expect(judgeStepFailure({ step: 'restore', signal: 'SIGKILL', said: 'restoring snapshot' })).toEqual({
      kind: 'could-not-run',
      reason: 'the restore tool was killed by SIGKILL (out of memory?): restoring snapshot',
    });
  });

  it("when the tool refuses the snapshot, then the verdict's error is the tool's own words", () => {
    expect(judgeStepFailure({ step: 'restore', said: BBOLT_REFUSAL })).toEqual({ kind: 'failed', check: 'restore', error: BBOLT_REFUSAL });
  });
});
