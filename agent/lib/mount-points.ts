/**
 * The mount points a Linux mount table lists (`/proc/self/mountinfo`: the fifth field of each line,
 * with spaces, tabs, newlines and backslashes written as octal escapes). Pure.
 */

/** The mount points of `mountinfo`'s text; empty for an empty or unreadable table. */
export function mountPoints(mountinfo: string): Set<string> {
  const points = new Set<string>();
  for (const line of mountinfo.split('\n')) {
    const point = line.split(' ')[4];
    if (point === undefined || !point.startsWith('/')) continue;
    points.add(point.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8))));
  }
  return points;
}
