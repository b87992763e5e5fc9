/**
 * The stories of the kbagent end-to-end test (test/integration/kbagent-e2e.test.ts with etcd TLS off,
 * kbagent-e2e-tls.test.ts with it on; two files so that jest runs them side by side): the real kbagent
 * in front of the agent against real etcd. Every pod of the KubeBlocks Component is a network
 * namespace (its own loopback, so kbagent's `127.0.0.1:3501` reaches only its own pod's agent)
 * running etcd, the agent sidecar (the built bin on Node 24) and KubeBlocks' kbagent
 * (scripts/kbagent.sh, from the Go module proxy). Everything kbagent is given comes from
 * deploy/kubeblocks-componentdefinition.yaml as KubeBlocks derives it: KB_AGENT_ACTION and
 * KB_AGENT_PROBE from `lifecycleActions` (kbagent-setup.ts), the vars resolved for the Component
 * (their expressions rendered by kbagent's own Go template engine), the sidecar's environment from
 * its container spec (kubeblocks-pod.ts). The test stands for KubeBlocks' controller: from a
 * namespace of its own it calls `POST /v1.0/action` on a pod's kbagent with no Content-Type,
 * `{"action", "parameters"}`, the parameters KubeBlocks sends (its vars and the action's `KB_*`, FQDNs
 * in KubeBlocks' form), and on a failed action calls again 1 s later, as its requeue does. Each story
 * prints its figures.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import YAML from 'yaml';
import { etcdInstall } from '../../scripts/etcd-version';
import { createPki, type TestPki } from './certs';
import { ROOT } from './built-agent';
import { eventually, patience } from './eventually';
import { goActionRequestJson, goHttpRequest } from './go-wire';
import {
  GoTemplates,
  kbAgentAnswer,
  kbAgentBinary,
  probeReport,
  type KbAgentAnswer,
  type KbAgentBinary,
  type ProbeReport,
} from './kbagent-process';
import { kbAgentPorts, kbAgentServerEnv } from './kbagent-setup';
import { actionParameters, containerEnv, fullComponentName, podFqdn, podName, resolveVars, type ComponentContext } from './kubeblocks-pod';
import { PodNetwork, type Netns } from './netns';
import { NetnsCaller } from './netns-caller';
import { NetnsPod } from './netns-pod';

// The definition is looked into field by field.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Spec = any;

/**
 * The sidecar's environment without prepare's settings (data directory, initial cluster, flags and
 * note files): here etcd is started by the harness with its flags, not by prepare's start program,
 * so there is no start directory for the agent to restart etcd through. The definition's real start
 * runs in test/kube/kubeblocks.test.ts, on KubeBlocks' own controller.
 */
function withoutPrepare(env: Record<string, string>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(env).filter(
      ([k]) => !/^ETCD_AGENT_(DATA_DIR|INITIAL_CLUSTER|INITIAL_CLUSTER_TOKEN|PREPARE_FLAGS_FILE|START_NOTE_FILE)$/.test(k),
    ),
  );
}

const SPEC: Spec = (YAML.parse(fs.readFileSync(path.join(ROOT, 'deploy/kubeblocks-componentdefinition.yaml'), 'utf8')) as Spec).spec;
const AGENT_PORT = 3501;
const KB_PORTS = kbAgentPorts(SPEC);
/** KubeBlocks requeues a Component whose memberJoin or memberLeave failed after 1 s (NewRequeueError(time.Second, …)). */
const REQUEUE_MS = 1000;
const ORDINALS = [0, 1, 2, 3, 4];
const BASE = { namespace: 'demo', cluster: 'etcd-e2e', component: 'etcd', clusterDomain: 'cluster.local' };
const ROLE_PERIOD_MS = SPEC.lifecycleActions.roleProbe.periodSeconds * 1000;
/** The agents' health max age (ETCD_AGENT_HEALTH_MAX_AGE_MS default): a role or an availability may lag a change by this much. */
const MAX_AGE_MS = 1000;
/** A `performance.now()` reading as epoch ms, the clock of the agents' log lines. */
const epoch = (perf: number): number => performance.timeOrigin + perf;
const AVAILABLE_PERIOD_MS = SPEC.lifecycleActions.availableProbe.periodSeconds * 1000;

/** One call of the controller and what came of it. */
interface Attempt {
  ms: number;
  answer?: KbAgentAnswer;
  lost?: boolean;
}

const say = (line: string): void => {
  process.stdout.write(`${line}\n`);
};
/** An attempt in a line: the agent's refusal is read out of kbagent's message ("<body>: http request failed, status: 409 …"). */
function short(a: Attempt): string {
  if (a.lost) return `reply lost after ${a.ms} ms`;
  if (a.answer?.error === undefined) return `ok in ${a.ms} ms`;
  const agent = /^\{.*"code":"([^"]+)","message":"((?:[^"\\]|\\.)*)".*\}: http request failed, status: (\d+)/s.exec(a.answer.message ?? '');
  return agent === null
    ? `${a.answer.error} in ${a.ms} ms (${(a.answer.message ?? '').slice(0, 120)})`
    : `${a.answer.error} in ${a.ms} ms (agent: ${agent[3]} ${agent[1]}, ${agent[2].slice(0, 100)})`;
}

/** Declares the stories, with the Component's (and so etcd's) TLS on or off. */
export function describeKbAgentEndToEnd(tls: boolean): void {
  describe(`KubeBlocks kbagent in front of the agent, end to end (etcd TLS ${tls ? 'on' : 'off'})`, () => {
    const label = tls ? 'TLS' : 'plain';
    let kb: KbAgentBinary;
    let templates: GoTemplates;
    let network: PodNetwork;
    let controller: NetnsCaller;
    let pki: TestPki | undefined;
    let dir: string;
    const pods = new Map<string, NetnsPod>();
    const names = ORDINALS.map((i) => podName(BASE, i));
    const ctxOf = (count: number): ComponentContext => ({ ...BASE, tls, pods: names.slice(0, count) });
    const fqdn = (pod: string): string => podFqdn(ctxOf(5), pod);
    const peerURL = (pod: string): string => `${tls ? 'https' : 'http'}://${fqdn(pod)}:2380`;
    const pod = (name: string): NetnsPod => pods.get(name) as NetnsPod;
    const vars = new Map<number, Record<string, string>>();
    const namespaces = new Map<number, Netns>();

    /** The vars KubeBlocks resolves for the Component with `count` pods. */
    async function varsFor(count: number): Promise<Record<string, string>> {
      let resolved = vars.get(count);
      if (resolved === undefined) {
        resolved = await resolveVars(SPEC, ctxOf(count), (t, data) => templates.render(t, data));
        vars.set(count, resolved);
      }
      return resolved;
    }

    /** Creates pod `ordinal` of a Component of `count` pods: its agent and kbagent, and etcd when `etcd` says how. */
    async function createPod(ordinal: number, count: number, etcd?: { cluster: string[]; state: 'new' | 'existing' }): Promise<NetnsPod> {
      const name = names[ordinal];
      const ns = namespaces.get(ordinal) as Netns;
      const p = new NetnsPod(network, ns, name, fqdn(name), path.join(dir, name), bins, tls);
      if (pki !== undefined) p.mountTls({ ca: pki.ca.cert, cert: pki.server.cert, key: pki.server.key });
      pods.set(name, p);
      if (etcd !== undefined) startEtcd(p, etcd.cluster, etcd.state);
      const resolved = await varsFor(count);
      const fields = { name, ip: ns.ip, hostIp: network.address(1), namespace: BASE.namespace };
      await Promise.all([
        p.startAgent(withoutPrepare(containerEnv(SPEC, 'etcd-lifecycle-agent', resolved, fields))),
        p.startKbAgent(
          {
            ...resolved,
            ...kbAgentServerEnv(SPEC, fullComponentName(ctxOf(count))),
            KB_AGENT_NAMESPACE: BASE.namespace,
            KB_AGENT_POD_NAME: name,
            KB_AGENT_POD_UID: crypto.randomUUID(),
            KB_AGENT_NODE_NAME: 'node-1',
          },
          KB_PORTS,
        ),
      ]);
      return p;
    }

    function startEtcd(p: NetnsPod, cluster: string[], state: 'new' | 'existing'): void {
      p.startEtcd(cluster.map((n) => `${n}=${peerURL(n)}`).join(','), state, `${BASE.cluster}-${BASE.component}`);
    }

    /** The controller's call of `action` on `target`'s kbagent, with KubeBlocks' parameters for a Component of `count` pods. */
    async function call(
      target: string,
      action: string,
      own: Record<string, string>,
      count: number,
      opts: { dropReply?: boolean } = {},
    ): Promise<Attempt> {
      const parameters = actionParameters(await varsFor(count), own);
      const started = performance.now();
      const answer = await controller.http(
        pod(target).ip,
        KB_PORTS.http,
        'POST',
        '/v1.0/action',
        goActionRequestJson({ action, parameters }),
      );
      const ms = Math.round(performance.now() - started);
      if (opts.dropReply === true || answer.noAnswer) return { ms, lost: true };
      return { ms, answer: kbAgentAnswer(answer.status, answer.body) };
    }

    /** The controller's call with a lost reply: kbagent and the agent do the work, the answer never arrives. */
    async function callLosingReply(target: string, action: string, own: Record<string, string>, count: number): Promise<Attempt> {
      const parameters = actionParameters(await varsFor(count), own);
      const started = performance.now();
      const body = goActionRequestJson({ action, parameters });
      const answer = await controller.send(
        pod(target).ip,
        KB_PORTS.http,
        goHttpRequest('POST', pod(target).ip, KB_PORTS.http, '/v1.0/action', [], body),
        { dropReply: true },
      );
      expect(answer.noAnswer).toBe(true);
      return { ms: Math.round(performance.now() - started), lost: true };
    }

    /** Calls until the action succeeds, 1 s after each failure (the controller's requeue), at most `max` calls. */
    async function untilDone(
      target: string,
      action: string,
      own: Record<string, string>,
      count: number,
      max: number,
      between?: (attempt: Attempt, i: number) => Promise<void>,
    ): Promise<Attempt[]> {
      const attempts: Attempt[] = [];
      for (let i = 0; i < max; i++) {
        const attempt = await call(target, action, own, count);
        attempts.push(attempt);
        if (attempt.answer?.error === undefined && attempt.lost !== true) return attempts;
        if (between !== undefined) await between(attempt, i);
        await new Promise((resolve) => setTimeout(resolve, REQUEUE_MS));
      }
      throw new Error(`${action} on ${target} did not succeed in ${max} calls: ${attempts.map(short).join('; ')}`);
    }

    /** The member list, read with etcdctl inside the namespace of the first of `from` whose etcd answers. */
    async function members(from: string[]): Promise<Array<{ name: string; peerURLs: string[]; isLearner: boolean }>> {
      let last: unknown;
      for (const name of from) {
        const p = pod(name);
        try {
          const out = await network.run(
            p.ns,
            bins.etcd.etcdctl,
            ['--endpoints', `${p.scheme}://127.0.0.1:2379`, ...p.etcdctlTls(), '--command-timeout=2s', 'member', 'list', '-w', 'json'],
            { PATH: process.env.PATH },
            5000,
          );
          // Member ids are uint64 numbers that JSON.parse would round: only names, URLs and learner flags are read.
          const list = JSON.parse(out) as { members: Array<{ name?: string; peerURLs: string[]; isLearner?: boolean }> };
          return list.members.map((m) => ({ name: m.name ?? '', peerURLs: m.peerURLs, isLearner: m.isLearner === true }));
        } catch (err) {
          last = err;
        }
      }
      throw last;
    }

    /**
     * Resolves once etcd accepts a membership change, asked in `through`'s namespace: a learner on an
     * address nobody listens on (TEST-NET-1) added, then removed, as helpers/membership.ts does for a
     * local cluster. etcd refuses changes until its peers have been connected for 5 s.
     */
    async function etcdAcceptsChanges(through: string): Promise<void> {
      const p = pod(through);
      const etcdctl = (args: string[]): Promise<string> =>
        network.run(
          p.ns,
          bins.etcd.etcdctl,
          ['--endpoints', `${p.scheme}://127.0.0.1:2379`, ...p.etcdctlTls(), '--command-timeout=2s', ...args],
          { PATH: process.env.PATH },
          5000,
        );
      const peerURL = `${p.scheme}://192.0.2.1:2380`;
      // A member id as hex, read from etcdctl's JSON, where it is a number too large for JSON.parse.
      const idOf = (out: string, where: RegExp): string | undefined => {
        const decimal = where.exec(out)?.[1];
        return decimal === undefined ? undefined : BigInt(decimal).toString(16);
      };
      const id = await eventually(
        async () => {
          // An add applied whose answer was lost is found in the list, not added twice.
          const listed = idOf(
            await etcdctl(['member', 'list', '-w', 'json']),
            new RegExp(`"ID":(\\d+),"name":"[^"]*","peerURLs":\\["${peerURL}"`),
          );
          if (listed !== undefined) return listed;
          const added = idOf(
            await etcdctl(['member', 'add', 'accepts-changes', '--learner', `--peer-urls=${peerURL}`, '-w', 'json']),
            /"member":\{"ID":(\d+)/,
          );
          if (added === undefined) throw new Error('etcdctl member add named no member');
          return added;
        },
        { within: 30_000, every: 250 },
      );
      await eventually(() => etcdctl(['member', 'remove', id]), { within: 10_000, every: 250 });
    }

    /**
     * How many answers to `path` (a probe's route) `target`'s agent served between `from` and `to`
     * (epoch ms), by its own request log lines: a probe reported late by one period shows as a second one.
     */
    function servedBetween(target: string, path: string, from: number, to: number): number {
      return pod(target).agentLines.filter((l) => {
        const at = Date.parse(String(l.timestamp));
        return l.message === 'request' && l.path === path && at >= from && at <= to;
      }).length;
    }

    /** The cluster's health as `target`'s agent serves it (GET /v1/health, open to any caller). */
    async function health(target: string): Promise<Spec> {
      const answer = await controller.http(pod(target).ip, AGENT_PORT, 'GET', '/v1/health');
      return answer.json;
    }

    /** The leader `from`'s agent names once its cluster is `voters` exactly, all healthy. */
    async function leader(from: string, voters: string[]): Promise<string> {
      const want = [...voters].sort().join(',');
      const h = await waitFor(
        () => health(from),
        (x) =>
          x?.status === 'healthy' &&
          x.members
            .filter((m: Spec) => !m.isLearner)
            .map((m: Spec) => m.name)
            .sort()
            .join(',') === want &&
          voters.includes(x.leader?.name),
        15_000,
      );
      return h.leader.name as string;
    }

    /** What the agent said, from kbagent's `failed` message "<the agent's body>: http request failed, status: …". */
    function refusal(answer: KbAgentAnswer | undefined): { status: string; code: string; message: string } {
      const match = /^(\{.*\}): http request failed, status: (\d+)/s.exec(answer?.message ?? '');
      if (answer?.error !== 'failed' || match === null) throw new Error(`not a refusal of the agent: ${JSON.stringify(answer)}`);
      const body = JSON.parse(match[1]) as { error: { code: string; message: string } };
      return { status: match[2], code: body.error.code, message: body.error.message };
    }

    /** The first probe report of `probe` by `target`'s kbagent after `since` that `match` accepts. */
    async function report(
      target: string,
      probe: string,
      since: number,
      match: (r: ProbeReport) => boolean,
      timeoutMs: number,
    ): Promise<ProbeReport> {
      const p = pod(target);
      try {
        const line = await p.kbLog.waitFor(
          (l) => {
            const r = probeReport(l);
            return r !== undefined && r.probe === probe && match(r);
          },
          since,
          timeoutMs,
        );
        return probeReport(line) as ProbeReport;
      } catch (err) {
        // What kbagent reported and what the agent answered around then, to see why.
        const reports = p.kbLog.lines.map(probeReport).filter((r) => r !== undefined && r.probe === probe && r.at >= since - 10_000);
        const path = probe === 'roleProbe' ? '/v1/role' : '/v1/available';
        const answers = p.agentLines.filter((l) => l.path === path).slice(-6);
        throw new Error(
          `${(err as Error).message}: ${probe} of ${target} since ${Math.round(since)}; its reports: ${JSON.stringify(reports.map((r) => ({ ...r, at: Math.round((r as ProbeReport).at) })))}; ` +
            `the agent's last answers on ${path}: ${JSON.stringify(answers)}`,
        );
      }
    }

    /** Waits until the last report of `probe` by `target`'s kbagent is a success that `match` accepts (it has seen the state). */
    async function reported(target: string, probe: string, match: (r: ProbeReport) => boolean, timeoutMs: number): Promise<void> {
      const last = (): ProbeReport | undefined =>
        pod(target)
          .kbLog.lines.map(probeReport)
          .filter((r) => r?.probe === probe)
          .at(-1);
      await waitFor(
        async () => last(),
        (r) => r !== undefined && r.code === 0 && match(r),
        timeoutMs,
      );
    }

    let bins: { etcd: ReturnType<typeof etcdInstall>; node24: string; kbagent: string };

    beforeAll(
      async () => {
        const started = performance.now();
        const phases: string[] = [];
        let mark = started;
        const phase = (what: string): void => {
          const now = performance.now();
          phases.push(`${what} ${Math.round(now - mark)}`);
          mark = now;
        };
        kb = await kbAgentBinary();
        bins = {
          etcd: etcdInstall(),
          node24: execFileSync('bash', [path.join(ROOT, 'scripts/node24.sh')], { encoding: 'utf8' }).trim(),
          kbagent: kb.path,
        };
        say(
          `[kbagent e2e ${label}] kbagent github.com/apecloud/kubeblocks ${kb.version} (${kb.path}); etcd ${bins.etcd.version}; agent on ${execFileSync(bins.node24, ['--version'], { encoding: 'utf8' }).trim()}`,
        );
        phase('binaries');
        templates = await GoTemplates.start(
          kb.path,
          SPEC.vars.filter((v: Spec) => v.expression).map((v: Spec) => v.expression),
        );
        phase('template engine');
        dir = fs.mkdtempSync(path.join(os.tmpdir(), `kbagent-e2e-${label}-`));
        network = await PodNetwork.create();
        const [ctl, ...podNamespaces] = await network.addAll([
          { name: 'ctl', address: network.address(2) },
          ...ORDINALS.map((i) => ({ name: `pod${i}`, address: network.address(11 + i) })),
        ]);
        ORDINALS.forEach((i) => namespaces.set(i, podNamespaces[i]));
        controller = await NetnsCaller.start(network, ctl, dir);
        network.writeHosts(ORDINALS.map((i) => ({ ip: network.address(11 + i), names: [fqdn(names[i])] })));
        phase('namespaces');
        if (tls)
          pki = await createPki({
            hosts: [`*.${fullComponentName(ctxOf(5))}-headless.${BASE.namespace}.svc.${BASE.clusterDomain}`, '127.0.0.1', 'localhost'],
          });
        const founders = names.slice(0, 3);
        await Promise.all([0, 1, 2].map((i) => createPod(i, 3, { cluster: founders, state: 'new' })));
        phase('pods');
        const h = await waitFor(
          () => health(names[0]),
          (x) => x?.status === 'healthy' && x.quorum.voters === 3,
          30_000,
        );
        phase('healthy');
        say(
          `[kbagent e2e ${label}] 3 pods (etcd, agent, kbagent each) up and healthy in ${Math.round(performance.now() - started)} ms (${phases.join(', ')} ms); leader ${h.leader.name}`,
        );
      },
      patience(20 * 60_000),
    );

    afterAll(async () => {
      await Promise.all([...pods.values()].map((p) => p.stop().catch(() => undefined)));
      await controller?.stop();
      await templates?.stop();
      await network?.destroy();
      await pki?.cleanup();
      // KBAGENT_E2E_KEEP=1 keeps every pod's etcd, agent and kbagent logs to read after a failure.
      if (dir !== undefined && process.env.KBAGENT_E2E_KEEP === '1') say(`[kbagent e2e ${label}] logs kept in ${dir}`);
      else if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true });
    });

    it("when a caller in another namespace posts a mutation to a pod's agent, then it is refused 403: it is another pod, and only kbagent's loopback calls are trusted", async () => {
      const answer = await controller.http(pod(names[0]).ip, AGENT_PORT, 'POST', '/v1/members/join', JSON.stringify({ name: 'x' }), [
        { name: 'Content-Type', value: 'application/json' },
      ]);
      const role = await call(names[0], 'roleProbe', {}, 3);

      expect(answer.status).toBe(403);
      expect(answer.json.error.code).toBe('forbidden');
      expect(role.answer).toEqual({ output: expect.stringMatching(/^(leader|follower)$/) });
      say(
        `[kbagent e2e ${label}] from the controller's namespace: POST /v1/members/join → ${answer.status} ${answer.json.error.code}; roleProbe through kbagent → ${role.answer?.output}`,
      );
    });

    it(
      'when a scale-out adds pod 3 and the reply of its first memberJoin is lost, then the replay succeeds and the cluster has one member for pod 3',
      async () => {
        const joining = names[3];
        await createPod(3, 4, { cluster: names.slice(0, 4), state: 'existing' });
        const own = { KB_JOIN_MEMBER_POD_NAME: joining, KB_JOIN_MEMBER_POD_FQDN: fqdn(joining) };
        // etcd refuses membership changes until every voter has been connected for 5 s (its strict
        // reconfiguration check): a scale-out right after the cluster formed would be refused, another story.
        await etcdAcceptsChanges(names[0]);

        const sent = performance.now();
        const first = await callLosingReply(joining, 'memberJoin', own, 4);
        const executed = await pod(joining).kbLog.waitFor(
          (l) => l.msg === 'Action Executed' && l.fields.action === 'memberJoin',
          sent,
          5000,
        );
        const after = await members([names[0], names[1]]);
        await new Promise((resolve) => setTimeout(resolve, REQUEUE_MS));
        const replays = await untilDone(joining, 'memberJoin', own, 4, 5);
        const listed = await members([names[0], names[1]]);

        // The first call did its work: kbagent had the agent's answer, and the member is in the list.
        expect(after.filter((m) => m.peerURLs.includes(peerURL(joining)))).toHaveLength(1);
        const result = JSON.parse(replays.at(-1)?.answer?.output ?? '{}');
        expect(result).toMatchObject({ action: 'memberJoin', complete: true, member: { name: joining, isLearner: false, started: true } });
        expect(listed.filter((m) => m.peerURLs.includes(peerURL(joining)))).toHaveLength(1);
        expect(listed).toHaveLength(4);
        expect(listed.every((m) => !m.isLearner)).toBe(true);
        say(
          `[kbagent e2e ${label}] scale-out 3→4: first memberJoin ${short(first)}, kbagent had "${String(executed.fields.result).slice(0, 90)}…" ` +
            `(then ${after.length} members, ${joining} a ${after.find((m) => m.peerURLs.includes(peerURL(joining)))?.isLearner ? 'learner' : 'voter'}); ` +
            `replay: ${replays.map(short).join(', ')} → ${result.outcome}; members ${listed.length}, one for ${joining}; its etcd restarted ${pod(joining).etcdRestartCount} times before it was a member`,
        );
      },
      patience(90_000),
    );

    it(
      'when memberJoin runs for pod 4 whose etcd has not started, then kbagent reports a failure the controller retries, and success once etcd has started',
      async () => {
        const joining = names[4];
        await createPod(4, 5);
        const own = { KB_JOIN_MEMBER_POD_NAME: joining, KB_JOIN_MEMBER_POD_FQDN: fqdn(joining) };
        let startedAt = 0;

        const attempts = await untilDone(joining, 'memberJoin', own, 5, 6, async () => {
          if (startedAt === 0) {
            startEtcd(pod(joining), names, 'existing');
            startedAt = performance.now();
          }
        });
        const listed = await members([names[0], names[1]]);

        expect(attempts.length).toBeGreaterThanOrEqual(2);
        expect(refusal(attempts[0].answer)).toMatchObject({
          status: '409',
          code: 'in-progress',
          message: expect.stringContaining(`${joining}: added (unstarted)`),
        });
        expect(JSON.parse(attempts.at(-1)?.answer?.output ?? '{}')).toMatchObject({
          complete: true,
          member: { name: joining, isLearner: false },
        });
        expect(listed.filter((m) => m.peerURLs.includes(peerURL(joining)))).toHaveLength(1);
        expect(listed.filter((m) => !m.isLearner)).toHaveLength(5);
        say(`[kbagent e2e ${label}] memberJoin before etcd started: ${attempts.map(short).join(' → ')}; 5 voters`);
      },
      patience(90_000),
    );

    describe('scale-in: memberLeave', () => {
      let leaving: string;
      let gone: string;

      it(
        'when two of five voters are down, then memberLeave of a healthy follower is refused (unsafe) and retried, nothing is removed; once they are back it is removed',
        async () => {
          const lead = await leader(names[0], names);
          const followers = names.filter((n) => n !== lead);
          leaving = followers[followers.length - 1];
          const down = followers.filter((n) => n !== leaving).slice(0, 2);
          await Promise.all(down.map((n) => pod(n).stopEtcd()));
          const own = { KB_LEAVE_MEMBER_POD_NAME: leaving, KB_LEAVE_MEMBER_POD_FQDN: fqdn(leaving) };
          let restoredAt = 0;

          const attempts = await untilDone(leaving, 'memberLeave', own, 5, 8, async (_a, i) => {
            if (i === 0) expect((await members([lead])).length).toBe(5);
            if (i === 1) {
              expect((await members([lead])).length).toBe(5);
              for (const n of down) startEtcd(pod(n), names, 'existing');
              restoredAt = performance.now();
            }
          });
          const listed = await members([lead]);

          expect(attempts.slice(0, 2).map((a) => refusal(a.answer))).toEqual([
            expect.objectContaining({ status: '409', code: 'unsafe' }),
            expect.objectContaining({ status: '409', code: 'unsafe' }),
          ]);
          const result = JSON.parse(attempts.at(-1)?.answer?.output ?? '{}');
          say(
            `[kbagent e2e ${label}] memberLeave of follower ${leaving} with ${down.join(', ')} down: ${attempts.map(short).join(' → ')}; ${result.outcome} ${Math.round(performance.now() - restoredAt)} ms after they were started again`,
          );
          expect(result).toMatchObject({
            action: 'memberLeave',
            outcome: expect.stringMatching(/^(removed|already-absent)$/),
            complete: true,
          });
          // `already-absent` only after a call whose removal went through while its answer could not say so
          // (a retryable 504 timeout or 503 unavailable: the leaving member's own etcd stops as it is removed).
          if (result.outcome === 'already-absent')
            expect(attempts.slice(2, -1).map((a) => refusal(a.answer).code)).toEqual(
              expect.arrayContaining([expect.stringMatching(/^(timeout|unavailable)$/)]),
            );
          expect(listed.map((m) => m.name).sort()).toEqual(names.filter((n) => n !== leaving).sort());
          await pod(leaving).stopEtcd();
        },
        patience(90_000),
      );

      it(
        'when memberLeave runs on the leader, then the agent moves leadership away first and removes it',
        async () => {
          const remaining = names.filter((n) => n !== leaving);
          gone = await leader(remaining[0], remaining);
          const own = { KB_LEAVE_MEMBER_POD_NAME: gone, KB_LEAVE_MEMBER_POD_FQDN: fqdn(gone) };

          const attempts = await untilDone(gone, 'memberLeave', own, 4, 6);
          const rest = remaining.filter((n) => n !== gone);
          const listed = await members(rest);
          const after = await leader(rest[0], rest);

          const result = JSON.parse(attempts.at(-1)?.answer?.output ?? '{}');
          expect(result).toMatchObject({ outcome: 'removed', complete: true, leaderTransferred: true });
          expect(listed.map((m) => m.name).sort()).toEqual([...rest].sort());
          expect(rest).toContain(after);
          await pod(gone).stopEtcd();
          say(
            `[kbagent e2e ${label}] memberLeave of leader ${gone}: ${attempts.map(short).join(' → ')}; leadership moved to ${after}; 3 voters left`,
          );
        },
        patience(60_000),
      );

      it(
        'when memberLeave is called again for a member already gone, then it succeeds and changes nothing',
        async () => {
          const own = { KB_LEAVE_MEMBER_POD_NAME: leaving, KB_LEAVE_MEMBER_POD_FQDN: fqdn(leaving) };
          const rest = names.filter((n) => n !== leaving && n !== gone);

          const attempt = await call(leaving, 'memberLeave', own, 3);
          const listed = await members(rest);

          expect(JSON.parse(attempt.answer?.output ?? '{}')).toMatchObject({ outcome: 'already-absent', complete: true });
          expect(listed).toHaveLength(3);
          say(`[kbagent e2e ${label}] memberLeave of ${leaving}, already gone: ${short(attempt)} → already-absent; 3 members`);
          await Promise.all(
            [leaving, gone].map(async (n) => {
              await pod(n).stop();
              pods.delete(n);
            }),
          );
        },
        patience(30_000),
      );
    });

    describe('switchover and roleProbe', () => {
      it(
        "when switchover names a candidate, then leadership moves to it, and kbagent's periodic roleProbe reports the new roles within its period",
        async () => {
          const members3 = [...pods.keys()];
          const current = await leader(members3[0], members3);
          const candidate = members3.find((n) => n !== current) as string;
          const own = {
            KB_SWITCHOVER_CURRENT_NAME: current,
            KB_SWITCHOVER_CURRENT_FQDN: fqdn(current),
            KB_SWITCHOVER_ROLE: 'leader',
            KB_SWITCHOVER_CANDIDATE_NAME: candidate,
            KB_SWITCHOVER_CANDIDATE_FQDN: fqdn(candidate),
          };
          // kbagent reports a role only when it changes: first its probe has seen the roles as they are now.
          await reported(current, 'roleProbe', (r) => r.output === 'leader', ROLE_PERIOD_MS + 3000);
          await reported(candidate, 'roleProbe', (r) => r.output === 'follower', ROLE_PERIOD_MS + 3000);

          const attempts = await untilDone(current, 'switchover', own, 3, 3);
          const done = performance.now();
          const [toLeader, toFollower] = await Promise.all([
            report(candidate, 'roleProbe', done - attempts.at(-1)!.ms, (r) => r.code === 0 && r.output === 'leader', ROLE_PERIOD_MS + 3000),
            report(current, 'roleProbe', done - attempts.at(-1)!.ms, (r) => r.code === 0 && r.output === 'follower', ROLE_PERIOD_MS + 3000),
          ]);

          expect(JSON.parse(attempts.at(-1)?.answer?.output ?? '{}')).toMatchObject({
            outcome: 'transferred',
            leader: { name: candidate },
          });
          expect(await leader(candidate, members3)).toBe(candidate);
          // Reported by the first probe served once the change was visible: the role may lag a change by
          // up to the max age (docs/api.md GET /v1/role), and no probe answered after that said the old role.
          const visible = epoch(done) + MAX_AGE_MS;
          expect(servedBetween(candidate, '/v1/role', visible, epoch(toLeader.at))).toBeLessThanOrEqual(1);
          expect(servedBetween(current, '/v1/role', visible, epoch(toFollower.at))).toBeLessThanOrEqual(1);
          say(
            `[kbagent e2e ${label}] switchover ${current} → ${candidate}: ${attempts.map(short).join(' → ')}; roleProbe (every ${ROLE_PERIOD_MS / 1000} s) reported ${candidate} leader ${Math.round(toLeader.at - done)} ms and ${current} follower ${Math.round(toFollower.at - done)} ms after the answer`,
          );
        },
        patience(60_000),
      );

      it(
        'when switchover names no candidate, then leadership moves to another voter, and roleProbe reports it',
        async () => {
          const members3 = [...pods.keys()];
          const current = await leader(members3[0], members3);
          const own = { KB_SWITCHOVER_CURRENT_NAME: current, KB_SWITCHOVER_CURRENT_FQDN: fqdn(current), KB_SWITCHOVER_ROLE: 'leader' };
          await Promise.all(
            members3.map((n) =>
              reported(n, 'roleProbe', (r) => r.output === (n === current ? 'leader' : 'follower'), ROLE_PERIOD_MS + 3000),
            ),
          );

          const attempts = await untilDone(current, 'switchover', own, 3, 3);
          const done = performance.now();
          const result = JSON.parse(attempts.at(-1)?.answer?.output ?? '{}');
          const next = result.leader?.name as string;
          const toLeader = await report(
            next,
            'roleProbe',
            done - attempts.at(-1)!.ms,
            (r) => r.code === 0 && r.output === 'leader',
            ROLE_PERIOD_MS + 3000,
          );

          expect(result).toMatchObject({ outcome: 'transferred', complete: true });
          expect(servedBetween(next, '/v1/role', epoch(done) + MAX_AGE_MS, epoch(toLeader.at))).toBeLessThanOrEqual(1);
          expect(next).not.toBe(current);
          expect(members3).toContain(next);
          say(
            `[kbagent e2e ${label}] switchover of ${current}, no candidate: ${attempts.map(short).join(' → ')} → ${next}; roleProbe reported it leader ${Math.round(toLeader.at - done)} ms after the answer`,
          );
        },
        patience(60_000),
      );
    });

    it(
      "when the cluster loses its quorum and gets it back, then kbagent's availableProbe reports unavailable, then available, each within its period",
      async () => {
        const members3 = [...pods.keys()];
        const [stays, ...down] = members3;
        // Every pod's kbagent has reported available last.
        await Promise.all(
          members3.map((n) => reported(n, 'availableProbe', (r) => r.output.startsWith('available'), AVAILABLE_PERIOD_MS + 3000)),
        );

        const lost = performance.now();
        await Promise.all(down.map((n) => pod(n).stopEtcd()));
        const stopped = epoch(performance.now());
        const failed = await report(stays, 'availableProbe', lost, (r) => r.code !== 0, AVAILABLE_PERIOD_MS + 3000);
        const back = performance.now();
        for (const n of down) startEtcd(pod(n), members3, 'existing');
        // When the agent first saw the quorum back: an observation begun after the restart that found it.
        const seen = await waitFor(
          () => health(stays),
          (h) => h?.quorum?.hasQuorum === true && Date.parse(h.observedAt) >= epoch(back),
          30_000,
        );
        const available = await report(stays, 'availableProbe', back, (r) => r.code === 0, AVAILABLE_PERIOD_MS + 6000);

        const said = refusal({ error: 'failed', message: failed.message });
        expect(said).toMatchObject({
          status: '503',
          code: 'unavailable',
          message: expect.stringMatching(/^no quorum: [01] of 3 voters healthy, 2 required$/),
        });
        expect(available.output).toMatch(/^available: /);
        // Each reported by the first probe served once the agent's observations could tell: an answer
        // is from an observation at most the max age old (docs/api.md GET /v1/available), so every probe
        // served from then on said so, and kbagent reports the first.
        expect(servedBetween(stays, '/v1/available', stopped + MAX_AGE_MS, epoch(failed.at))).toBeLessThanOrEqual(1);
        expect(servedBetween(stays, '/v1/available', Date.parse(seen.observedAt) + MAX_AGE_MS, epoch(available.at))).toBeLessThanOrEqual(1);
        say(
          `[kbagent e2e ${label}] availableProbe (every ${AVAILABLE_PERIOD_MS / 1000} s) of ${stays}: quorum lost → reported code ${failed.code} in ${Math.round(failed.at - lost)} ms ` +
            `(agent: ${said.status} ${said.code}, ${said.message}); quorum back → reported code ${available.code} in ${Math.round(available.at - back)} ms (output "${available.output}…", its first 32 bytes)`,
        );
      },
      patience(60_000),
    );
  });
}

/** Asks `get` every 200 ms until `ok` (a patience: helpers/eventually.ts); the error names the last value. */
async function waitFor<T>(get: () => Promise<T>, ok: (value: T) => boolean, timeoutMs: number): Promise<T> {
  return eventually(
    async () => {
      const value = await get();
      if (!ok(value)) throw new Error(`not reached; last: ${JSON.stringify(value)}`);
      return value;
    },
    { within: timeoutMs, every: 200 },
  );
}
