import { Writable } from 'node:stream';
import { createLogger, redact, redactText } from '../../agent/observability/logger';

describe('redact', () => {
  it.each([
    [{ authorization: 'Bearer abc' }, { authorization: '[redacted]' }],
    [{ headers: { Authorization: 'x', accept: 'y' } }, { headers: { Authorization: '[redacted]', accept: 'y' } }],
    [
      { password: 'p', etcdPassword: 'p', passwordFile: '/f' },
      { password: '[redacted]', etcdPassword: '[redacted]', passwordFile: '[redacted]' },
    ],
    [
      { privateKey: 'k', private_key: 'k', clientSecret: 's', cookie: 'c' },
      { privateKey: '[redacted]', private_key: '[redacted]', clientSecret: '[redacted]', cookie: '[redacted]' },
    ],
    [{ list: [{ token: 't' }] }, { list: [{ token: '[redacted]' }] }],
    [
      { name: 'etcd-0', peerURLs: ['http://a:2380'] },
      { name: 'etcd-0', peerURLs: ['http://a:2380'] },
    ],
  ])('when a field is named like a secret, then its value is replaced: %p', (input, expected) => {
    expect(redact(input)).toEqual(expected);
  });

  it.each([
    ['sent Authorization: Bearer abc.def-123 to agent', 'sent Authorization: Bearer [redacted] to agent'],
    ['Basic dXNlcjpwYXNz', 'Basic [redacted]'],
    ['dial http://root:hunter2@127.0.0.1:2379 failed', 'dial http://[redacted]@127.0.0.1:2379 failed'],
    ['password=hunter2&x=1', 'password=[redacted]&x=1'],
    ['{"token":"abc"}', '{"token":"[redacted]"}'],
    ['-----BEGIN PRIVATE KEY-----\nMIGH\n-----END PRIVATE KEY-----', '[redacted private key]'],
    ['-----BEGIN EC PRIVATE KEY-----\nMHc', '[redacted private key]'],
    ['etcd is unreachable', 'etcd is unreachable'],
    ['token file loaded', 'token file loaded'],
  ])('when text is %p, then it logs as %p', (text, expected) => {
    expect(redactText(text)).toBe(expected);
  });

  it('when an error is logged, then its message and stack are redacted too', () => {
    const err = new Error('connect to http://u:topsecret@h:1 failed');
    const out = redact({ error: err }) as { error: { message: string; stack: string; name: string } };
    expect(out.error.name).toBe('Error');
    expect(JSON.stringify(out)).not.toContain('topsecret');
  });

  it('when a logger writes a line with secrets in fields and the message, then none reaches the stream', () => {
    let text = '';
    const stream = new Writable({
      write(chunk, _enc, done) {
        text += String(chunk);
        done();
      },
    });
    const logger = createLogger({ stream, level: 'debug' });
    logger.info('calling with Bearer tok-123', {
      authorization: 'Bearer tok-123',
      nested: { password: 'pw-456' },
      url: 'https://a:pw-789@h',
    });
    logger.error(new Error('password: pw-000'));
    expect(text).toContain('[redacted]');
    for (const secret of ['tok-123', 'pw-456', 'pw-789', 'pw-000']) expect(text).not.toContain(secret);
  });
});
