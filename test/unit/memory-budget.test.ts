/**
 * The sidecar's memory request and limit (kube-inject, and the deploy files that carry them) against
 * the resident memory the bench run quoted in docs/benchmarks.md measured: the request covers the idle agent,
 * the limit 1.5× its peak under the /v1/health load, on every Node version the run quotes. A new
 * measurement that outgrows them, or resources cut below it, fails here.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { kubeInject } from '../../agent/cli/kube-inject';
import { SIDECAR_NAME, SIDECAR_RESOURCES } from '../../agent/cli/kube-inject-sidecar';

const ROOT = join(__dirname, '..', '..');

/** `96Mi` → 96 (MiB); only the binary units the deploy files use. */
function mebibytes(quantity: string): number {
  const m = /^(\d+(?:\.\d+)?)(Mi|Gi)$/.exec(quantity);
  if (m === null) throw new Error(`not a Mi/Gi quantity: ${quantity}`);
  return Number(m[1]) * (m[2] === 'Gi' ? 1024 : 1);
}

/** The figures of every bench table row in docs/benchmarks.md whose figure starts with `figure`, in MiB. */
function quoted(doc: string, figure: string): number[] {
  return doc
    .split('\n')
    .filter((line) => line.startsWith(figure))
    .map((line) => {
      const value = /^[^|]*\|\s*([\d.,]+) MiB\s*\|/.exec(line);
      if (value === null) throw new Error(`docs/benchmarks.md row without a MiB figure: ${line}`);
      return Number(value[1].replace(/,/g, ''));
    });
}

interface Resources {
  requests: { memory: string };
  limits: { memory: string };
}

/** The resources of every container named like the sidecar in a YAML file. */
function sidecarResources(yamlText: string): Resources[] {
  const found: Resources[] = [];
  const walk = (node: unknown): void => {
    if (Array.isArray(node)) node.forEach(walk);
    else if (typeof node === 'object' && node !== null) {
      const o = node as Record<string, unknown>;
      if (o.name === SIDECAR_NAME && typeof o.resources === 'object') found.push(o.resources as Resources);
      Object.values(o).forEach(walk);
    }
  };
  for (const doc of parseAllDocuments(yamlText)) walk(doc.toJS());
  return found;
}

describe("the sidecar's memory request and limit against the measured memory in docs/benchmarks.md", () => {
  const doc = readFileSync(join(ROOT, 'docs/benchmarks.md'), 'utf8');
  const idle = quoted(doc, 'resident memory, idle');
  const peak = quoted(doc, 'resident memory, peak under the /v1/health load');

  it('when docs/benchmarks.md quotes the bench run, then it has idle and peak figures for Node 20 and Node 24', () => {
    expect(idle.length).toBeGreaterThanOrEqual(2);
    expect(peak.length).toBeGreaterThanOrEqual(2);
    expect(doc).toMatch(/\[start-up and memory · node v20\./);
    expect(doc).toMatch(/\[start-up and memory · node v24\./);
  });

  it('when kube-inject adds the sidecar, then its request covers the largest idle figure and its limit 1.5× the largest peak', () => {
    expect(mebibytes(SIDECAR_RESOURCES.requests.memory)).toBeGreaterThanOrEqual(Math.max(...idle));
    expect(mebibytes(SIDECAR_RESOURCES.limits.memory)).toBeGreaterThanOrEqual(1.5 * Math.max(...peak));
  });

  it.each(['deploy/statefulset-with-agent.yaml', 'deploy/kubeblocks-componentdefinition.yaml'])(
    'when %s runs the sidecar, then it carries the same request and limit as kube-inject',
    (file) => {
      const found = sidecarResources(readFileSync(join(ROOT, file), 'utf8'));
      expect(found.length).toBeGreaterThan(0);
      for (const resources of found) {
        expect(resources.requests.memory).toBe(SIDECAR_RESOURCES.requests.memory);
        expect(resources.limits.memory).toBe(SIDECAR_RESOURCES.limits.memory);
      }
    },
  );

  it('when kube-inject injects a StatefulSet, then the printed sidecar has exactly those resources', () => {
    const out = kubeInject(readFileSync(join(ROOT, 'deploy/statefulset.yaml'), 'utf8'));
    expect(sidecarResources(out)).toEqual([SIDECAR_RESOURCES]);
  });
});
