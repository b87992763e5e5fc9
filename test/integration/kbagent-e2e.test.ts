/**
 * The real kbagent in front of the agent, end to end against real etcd, with etcd TLS off: the stories
 * are in test/helpers/kbagent-e2e.ts (kbagent-e2e-tls.test.ts runs them with TLS on, side by side).
 */
import { describeKbAgentEndToEnd } from '../helpers/kbagent-e2e';

describeKbAgentEndToEnd(false);
