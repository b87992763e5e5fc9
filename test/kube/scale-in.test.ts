/**
 * Scale in, exactly as docs/deploy/statefulset.md ("Scale in") tells a user: the commands of its
 * block, run as they are written (in the story's namespace), `leave` through `kubectl exec`
 * repeated until it exits 0 where the block says so, then `kubectl scale`. The block removes etcd-4
 * from 5; the story runs it for etcd-4 and again for etcd-3, from 5 members to 3. After each round
 * the members and the pods agree: the same names, all voters, every agent `healthy`, and
 * `/v1/health?expected=` finds nothing missing or unexpected; the scaled-away pods' claims are gone
 * (the kit's persistentVolumeClaimRetentionPolicy). Every acknowledged write is there.
 */
import fs from 'node:fs';
import path from 'node:path';
import { ROOT } from '../helpers/built-agent';
import { eventually } from '../helpers/eventually';
import { kubectl, mustKubectl } from './helpers/commands';
import { installKit, podNames, waitForMembers } from './helpers/kit';
import { askHealth } from './helpers/observe';
import { kubeStory } from './helpers/story';

/** One command of the documented block: its words, and whether the block says to repeat it until it exits 0. */
interface DocumentedCommand {
  words: string[];
  untilZero: boolean;
}

/** The commands of the sh block under "## Scale in" in docs/deploy/statefulset.md. */
function documentedScaleIn(): DocumentedCommand[] {
  const doc = fs.readFileSync(path.join(ROOT, 'docs/deploy/statefulset.md'), 'utf8');
  const section = /^## Scale in\n([\s\S]*?)(?=^## )/m.exec(doc)?.[1];
  const block = section === undefined ? undefined : /```sh\n([\s\S]*?)```/.exec(section)?.[1];
  if (block === undefined) throw new Error('docs/deploy/statefulset.md has no sh block under "## Scale in"');
  return block
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((line) => {
      const [command, comment = ''] = line.split(/\s+#\s*/, 2);
      const words = command.trim().split(/\s+/);
      if (words[0] !== 'kubectl') throw new Error(`docs/deploy/statefulset.md, Scale in: not a kubectl command: ${line}`);
      return { words, untilZero: /repeat until it exits 0/.test(comment) };
    });
}

kubeStory(
  'when members leave through kubectl exec … leave and the StatefulSet is scaled in as docs/deploy/statefulset.md says, from 5 to 3, then members and pods agree and no acknowledged write is lost',
  'scale-in',
  async (s) => {
    const documented = documentedScaleIn();
    // The block is written for etcd-4 of 5.
    expect(documented.map((c) => c.words.join(' ')).join('\n')).toMatch(/leave etcd-4[\s\S]*--replicas=4/);
    await installKit(s, '3.6');
    await mustKubectl(['scale', 'statefulset', 'etcd', '--replicas=5', '-n', s.namespace]);
    await waitForMembers(s, podNames(5));
    s.writer.start();
    await s.moreWrites();
    const leaving = Date.now();

    for (const replicas of [4, 3]) {
      for (const { words, untilZero } of documented) {
        const args = [
          '-n',
          s.namespace,
          ...words.slice(1).map((w) => w.replace('etcd-4', `etcd-${replicas}`).replace('--replicas=4', `--replicas=${replicas}`)),
        ];
        s.step(`kubectl ${args.join(' ')}`);
        if (untilZero)
          await eventually(
            async () => {
              const ran = await kubectl(args);
              if (ran.code !== 0) throw new Error(`kubectl ${args.join(' ')} exited ${ran.code}: ${ran.stderr}${ran.stdout}`);
            },
            { within: 120_000, every: 2000 },
          );
        else await mustKubectl(args);
      }
      await waitForMembers(s, podNames(replicas));
      // The kit's persistentVolumeClaimRetentionPolicy (whenScaled: Delete) takes the scaled-away claims.
      await eventually(
        async () => {
          const claims = (await s.api.list(`/api/v1/namespaces/${s.namespace}/persistentvolumeclaims`)).map((c) => c.metadata.name);
          expect(claims.sort()).toEqual(podNames(replicas).map((n) => `data-${n}`));
        },
        { within: 120_000, every: 1000 },
      );
      const answer = await askHealth(s.pods.pod('etcd-0')!, podNames(replicas));
      expect({ status: answer.status, voters: answer.voters, expected: answer.expected }).toEqual({
        status: 'healthy',
        voters: replicas,
        expected: { missing: [], unexpected: [] },
      });
    }
    await s.moreWrites();
    const writes = await s.finishWrites();
    expect(writes.filter((w) => w.acknowledged && w.sentAt > leaving).length).toBeGreaterThan(0);
  },
);
