import { NoSuchBucket, NoSuchKey, NoSuchUpload, S3ServiceException } from '@aws-sdk/client-s3';
import { s3ErrorText, s3Failure } from '../../agent/backup/s3-errors';
import type { StoreFailure } from '../../agent/backup/store';

const meta = (httpStatusCode: number): { httpStatusCode: number } => ({ httpStatusCode });
/** An answer of the store as the SDK throws it: its code as the name, its HTTP status in $metadata. */
const answer = (name: string, status: number, message = `${name} said`): S3ServiceException =>
  new S3ServiceException({ name, $fault: status >= 500 ? 'server' : 'client', $metadata: meta(status), message });
/** A socket error as Node raises it. */
const socket = (code: string, message = `connect ${code} 127.0.0.1:7070`): Error => Object.assign(new Error(message), { code });

describe('s3Failure', () => {
  it.each<[string, unknown, StoreFailure]>([
    ['connection refused', socket('ECONNREFUSED'), 'unreachable'],
    [
      'both loopback addresses refused (AggregateError)',
      Object.assign(new AggregateError([socket('ECONNREFUSED')], ''), { code: 'ECONNREFUSED' }),
      'unreachable',
    ],
    ['a name that does not resolve', socket('ENOTFOUND', 'getaddrinfo ENOTFOUND s3.invalid'), 'unreachable'],
    [
      'the connection reset (the SDK names it a TimeoutError)',
      Object.assign(socket('ECONNRESET', 'socket hang up'), { name: 'TimeoutError' }),
      'unreachable',
    ],
    [
      "a socket error the SDK's retry layer wrapped as text",
      new Error('AWS SDK error wrapper for Error: connect ECONNREFUSED 127.0.0.1:7070'),
      'unreachable',
    ],
    [
      "the handler's request timeout",
      Object.assign(new Error('a request has exceeded the configured 60000 ms requestTimeout.'), {
        name: 'TimeoutError',
        code: 'ETIMEDOUT',
      }),
      'timeout',
    ],
    ["the handler's connection timeout", Object.assign(new Error('did not establish a connection'), { name: 'TimeoutError' }), 'timeout'],
    ["the call's signal", Object.assign(new Error('Request aborted'), { name: 'AbortError' }), 'timeout'],
    ['anything once the signal fired', socket('ECONNRESET'), 'timeout'],
    ['an unknown access key', answer('InvalidAccessKeyId', 403), 'credentials'],
    ['a wrong secret', answer('SignatureDoesNotMatch', 403), 'credentials'],
    ['no permission', answer('AccessDenied', 403), 'credentials'],
    ['an expired token', answer('ExpiredToken', 400), 'credentials'],
    ["versitygw's unknown access key", answer('XAdminUserNotFound', 404), 'credentials'],
    ['a bare 403 of a HEAD', answer('Forbidden', 403), 'credentials'],
    [
      'no credentials in the chain',
      Object.assign(new Error('Could not load credentials from any providers'), { name: 'CredentialsProviderError' }),
      'credentials',
    ],
    ['a missing bucket', new NoSuchBucket({ $metadata: meta(404), message: 'The specified bucket does not exist' }), 'no-bucket'],
    ['a missing key', new NoSuchKey({ $metadata: meta(404), message: 'The specified key does not exist.' }), 'not-found'],
    ['a bare 404 of a HEAD', answer('NotFound', 404), 'not-found'],
    ['a multipart upload already gone', new NoSuchUpload({ $metadata: meta(404), message: 'gone' }), 'not-found'],
    ['another 404', answer('NoSuchThing', 404), 'not-found'],
    ['a server error', answer('InternalError', 500), 'failed'],
    ['throttling', answer('SlowDown', 503), 'failed'],
    ['something not an error', 'boom', 'failed'],
  ])('%s', (_case, err, failure) => {
    expect(s3Failure(err, _case === 'anything once the signal fired')).toBe(failure);
  });
});

describe('s3ErrorText', () => {
  it.each<[string, unknown, string]>([
    [
      'an answer: its code, its status and its message',
      answer('NoSuchBucket', 404, 'The specified bucket does not exist'),
      'NoSuchBucket, HTTP 404: The specified bucket does not exist',
    ],
    ['a socket error whose message holds its code', socket('ECONNREFUSED'), 'connect ECONNREFUSED 127.0.0.1:7070'],
    ['a socket error whose message does not', socket('ECONNRESET', 'socket hang up'), 'ECONNRESET: socket hang up'],
    [
      'an AggregateError without a message: its inner ones',
      Object.assign(new AggregateError([socket('ECONNREFUSED', 'connect ECONNREFUSED ::1:7070'), socket('ECONNREFUSED')], ''), {
        code: 'ECONNREFUSED',
      }),
      'AggregateError: connect ECONNREFUSED ::1:7070; connect ECONNREFUSED 127.0.0.1:7070',
    ],
    ['an error with nothing to say', new Error(''), 'an error without a message'],
    ['not an error', 'boom', 'boom'],
  ])('%s', (_case, err, text) => {
    expect(s3ErrorText(err)).toBe(text);
  });

  it("when the answer carries the request's signing fields, then the text holds none of them", () => {
    const err = Object.assign(
      answer('SignatureDoesNotMatch', 403, 'The request signature we calculated does not match the signature you provided.'),
      {
        AWSAccessKeyId: 'AKIAEXAMPLEKEY',
        StringToSign: 'AWS4-HMAC-SHA256\n20261205T000000Z',
        SignatureProvided: 'abcdef0123456789',
      },
    );
    const text = s3ErrorText(err);
    for (const field of ['AKIAEXAMPLEKEY', 'AWS4-HMAC-SHA256', 'abcdef0123456789']) expect(text).not.toContain(field);
  });
});
