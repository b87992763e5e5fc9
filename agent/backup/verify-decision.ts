/**
 * Whether a failed step of a verification (verify.ts) is a verdict on the backup, written into its
 * manifest for good, or only says that the verification could not run here. Pure.
 *
 *   scratch: the scratch directory, the snapshot written into it or read back  → could not run
 *   restore: the tool did not start (ENOENT, EACCES, ENOEXEC)                  → could not run
 *   restore: killed by the agent's timeout, or by a signal (the OOM killer)    → could not run
 *   restore: it names a local condition (no space left, permission denied,
 *            a read-only file system, no memory, too many open files, I/O)    → could not run
 *   restore: it does not know the command or a flag (not etcd's restore tool)  → could not run
 *   restore: it exited with an error otherwise: it refused the snapshot        → failed `restore`
 *   read:    no database where the tool should have written one                → could not run
 *   read:    a system error reading it                                         → could not run
 *   read:    the restored backend is not what etcd writes                       → failed `read`
 *
 * Invariant: `failed` is only ever the backup's bytes (the sha256 checks, decided in verify.ts) or
 * the restore tool's refusal of them; a failure of the machine the verification ran on never marks a
 * backup failed, which a restore would then refuse even by name.
 */

/** The step of a verification that failed. */
export type VerifyStep = 'scratch' | 'restore' | 'read';

/** A failed step, as far as the rule reads it. */
export interface StepFailure {
  step: VerifyStep;
  /** The system error's code, when the step failed on one (ENOSPC, EACCES; ENOENT of a tool not found). */
  errno?: string;
  /** The signal that killed the restore tool. */
  signal?: string;
  /** The agent killed the restore tool at its timeout. */
  timedOut?: boolean;
  /** The tool's last lines of output, or the error's message. */
  said: string;
}

/** The rule's answer: the backup's verdict, or why the verification could not run. */
export type StepVerdict = { kind: 'failed'; check: 'restore' | 'read'; error: string } | { kind: 'could-not-run'; reason: string };

/** What the restore tool prints when the machine, not the snapshot, failed it. */
const LOCAL_CONDITION =
  /no space left on device|disk quota exceeded|read-only file system|permission denied|operation not permitted|cannot allocate memory|out of memory|too many open files|input\/output error/i;

/** What a program prints for a command or flag it does not have. */
const NOT_THE_TOOL = /unknown (sub)?command|unknown (shorthand )?flag|flag provided but not defined/i;

/** Decides; see the table in the module comment. */
export function judgeStepFailure(f: StepFailure): StepVerdict {
  const couldNotRun = (reason: string): StepVerdict => ({ kind: 'could-not-run', reason });
  switch (f.step) {
    case 'scratch':
      return couldNotRun(`the scratch directory: ${f.said}`);
    case 'restore':
      if (f.errno !== undefined) return couldNotRun(`the restore tool did not start (${f.errno}): ${f.said}`);
      if (f.timedOut === true) return couldNotRun(`the restore tool ran out of time: ${f.said}`);
      if (f.signal !== undefined) return couldNotRun(`the restore tool was killed by ${f.signal} (out of memory?): ${f.said}`);
      if (LOCAL_CONDITION.test(f.said)) return couldNotRun(`the restore tool failed on this machine: ${f.said}`);
      if (NOT_THE_TOOL.test(f.said)) return couldNotRun(`the program run is not etcd's snapshot restore: ${f.said}`);
      return { kind: 'failed', check: 'restore', error: f.said };
    case 'read':
      if (f.errno === 'ENOENT') return couldNotRun(`the restore tool ended without error but wrote no database: ${f.said}`);
      if (f.errno !== undefined) return couldNotRun(`the restored database could not be read here (${f.errno}): ${f.said}`);
      return { kind: 'failed', check: 'read', error: `the restored data could not be opened: ${f.said}` };
  }
}
