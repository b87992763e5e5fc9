/**
 * The real kbagent in front of the agent, end to end against real etcd, with the Component's TLS on
 * (etcd serves https to clients and peers and asks for client certificates, as the ComponentDefinition
 * configures it): the stories of test/helpers/kbagent-e2e.ts.
 */
import { describeKbAgentEndToEnd } from '../helpers/kbagent-e2e';

describeKbAgentEndToEnd(true);
