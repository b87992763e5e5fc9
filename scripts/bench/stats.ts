/**
 * Small statistics for noisy machines: medians and percentiles of samples,
 * never a single time.
 */

/** The `p`-th percentile (0–100) of `samples`, by linear interpolation; NaN when empty. */
export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = (p / 100) * (sorted.length - 1);
  const lo = Math.floor(rank);
  const hi = Math.ceil(rank);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo);
}

/** The median of `samples`. */
export function median(samples: readonly number[]): number {
  return percentile(samples, 50);
}

/** The 99th percentile of `samples`. */
export function p99(samples: readonly number[]): number {
  return percentile(samples, 99);
}

/** Median, p99, min, max and count of `samples`, rounded for a report. */
export interface Summary {
  n: number;
  median: number;
  p99: number;
  min: number;
  max: number;
}

/** Summarises `samples` (values rounded to 0.01). */
export function summarize(samples: readonly number[]): Summary {
  return {
    n: samples.length,
    median: round(median(samples)),
    p99: round(p99(samples)),
    min: round(Math.min(...samples)),
    max: round(Math.max(...samples)),
  };
}

/** `value` rounded to `digits` decimals. */
export function round(value: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

/** Milliseconds since `start` (a `performance.now()` reading). */
export function since(start: number): number {
  return performance.now() - start;
}

/** Resolves after `ms`. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
