import { InvalidTokenError, MissingTokenError } from './errors.ts';

/** The bearer token of an `Authorization` header (RFC 6750 §2.1; the scheme is case-insensitive). */
export function bearerToken(header: string | undefined): string {
  if (header === undefined || header === '') {
    throw new MissingTokenError('missing_token', 'no bearer token in the Authorization header');
  }
  // The common spelling first: a slice, no regular expression, on every request.
  let token: string;
  if (header.startsWith('Bearer ')) token = header.slice(7);
  else {
    const m = /^bearer +(.*)$/is.exec(header);
    if (!m) throw new MissingTokenError('not_bearer', 'the Authorization scheme is not Bearer');
    token = m[1]!;
  }
  token = token.trim();
  if (token === '') throw new InvalidTokenError('malformed_token', 'the bearer token is empty');
  if (token.includes(' '))
    throw new InvalidTokenError('malformed_token', 'the bearer token contains a space');
  return token;
}
