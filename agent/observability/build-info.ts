/**
 * What `etcd_agent_build_info` says about this build. The version is package.json's, read at
 * compile time (tsc copies package.json beside dist/agent; the bundle, dist/bin, inlines it, so
 * the image needs no package.json), so it is the version that was built.
 */
import { version } from '../../package.json';

/** The agent's version, as package.json names it. */
export const BUILD_INFO = { version } as const;
