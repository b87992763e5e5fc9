/** The agent's HTTP routes (CONTRACT §4, §5), used to tell 404 from 405. */
export const ROUTES: ReadonlyArray<{ method: 'GET' | 'POST'; path: string; mutating: boolean }> = [
  { method: 'POST', path: '/v1/members/join', mutating: true },
  { method: 'POST', path: '/v1/members/leave', mutating: true },
  { method: 'POST', path: '/v1/members/promote', mutating: true },
  { method: 'POST', path: '/v1/leader/transfer', mutating: true },
  { method: 'POST', path: '/v1.0/action', mutating: true },
  { method: 'POST', path: '/v1/recovery', mutating: true },
  { method: 'GET', path: '/v1/recovery', mutating: false },
  { method: 'GET', path: '/v1/recovery/local', mutating: false },
  { method: 'GET', path: '/v1/members', mutating: false },
  { method: 'GET', path: '/v1/operations', mutating: false },
  { method: 'GET', path: '/v1/health', mutating: false },
  { method: 'GET', path: '/v1/health/local', mutating: false },
  { method: 'GET', path: '/v1/role', mutating: false },
  { method: 'GET', path: '/livez', mutating: false },
  { method: 'GET', path: '/readyz', mutating: false },
  { method: 'GET', path: '/metrics', mutating: false },
];
