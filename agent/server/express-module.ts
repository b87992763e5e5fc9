/**
 * express is loaded on first use, not when the agent starts: the probe and health routes are served
 * without it (fast-routes.ts), and loading it is a large part of a start-up's CPU. The first request
 * another route serves pays for it instead.
 *
 * Invariant: files that the fast routes load (middleware.ts, request-guard.ts, health-answer.ts)
 * import only types from 'express' and take its values from `express()` here.
 */
type ExpressModule = typeof import('express');

let loaded: ExpressModule | undefined;

/** The express module, loaded now if this is its first use. */
export function expressModule(): ExpressModule {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded on first use, see above
  loaded ??= require('express') as ExpressModule;
  return loaded;
}
