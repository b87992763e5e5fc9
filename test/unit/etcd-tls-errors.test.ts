import { GRPCUnavailableError } from 'etcd3';
import { toAgentError } from '../../agent/etcd/errors';

// The texts are what grpc-js (OpenSSL) said in test/integration/etcd-tls-auth.test.ts.
describe('toAgentError: TLS misconfiguration between the agent and etcd', () => {
  const refusedClientCert = /refused the agent TLS client certificate/;
  const untrustedServer = /does not trust the TLS certificate of etcd/;
  it.each<[string, RegExp]>([
    [
      '14 UNAVAILABLE: No connection established. Last error: 80DC:error:0A000412:SSL routines:ssl3_read_bytes:sslv3 alert bad certificate:rec_layer_s3.c:1601:SSL alert number 42',
      refusedClientCert,
    ],
    [
      '14 UNAVAILABLE: No connection established. Last error: error:0A00045C:SSL routines::tlsv13 alert certificate required',
      refusedClientCert,
    ],
    ['14 UNAVAILABLE: No connection established. Last error: error:0A000418:SSL routines::tlsv1 alert unknown ca', refusedClientCert],
    [
      '14 UNAVAILABLE: No connection established. Last error: Error: unable to verify the first certificate. Resolution note: ',
      untrustedServer,
    ],
    ['14 UNAVAILABLE: No connection established. Last error: Error: self-signed certificate', untrustedServer],
    ['14 UNAVAILABLE: No connection established. Last error: Error: unable to get local issuer certificate', untrustedServer],
    ['14 UNAVAILABLE: No connection established. Last error: Error: certificate has expired', /has expired/],
    [
      "14 UNAVAILABLE: No connection established. Last error: Error: Hostname/IP does not match certificate's altnames: IP: 10.0.0.1 is not in the cert's list",
      /does not name the endpoint host/,
    ],
    ['14 UNAVAILABLE: No connection established. Last error: error:0A00010B:SSL routines::wrong version number', /does not speak TLS/],
  ])('when the handshake fails with %p, then the answer is unavailable and says %p', (message, say) => {
    const error = toAgentError(new GRPCUnavailableError(message));
    expect(error).toMatchObject({ code: 'unavailable', status: 503, retryable: true });
    expect(error.message).toMatch(say);
    expect(error.details).toEqual({ etcd: message.slice(0, 300) });
  });

  it('when etcd is merely unreachable, then the answer stays "etcd is unreachable"', () => {
    expect(
      toAgentError(new GRPCUnavailableError('14 UNAVAILABLE: No connection established. Last error: connect ECONNREFUSED 127.0.0.1:1'))
        .message,
    ).toBe('etcd is unreachable');
  });
});
