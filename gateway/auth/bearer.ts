import { InvalidTokenError, MissingTokenError } from '../errors.ts';

/** The access token of an `Authorization` header and the scheme it came under. */
export interface PresentedToken {
  token: string;
  /** `Authorization: DPoP <token>` (RFC 9449 §7.1): the request must carry a proof by the token's key. */
  dpop: boolean;
}

/**
 * The token of an `Authorization` header: `Bearer` (RFC 6750 §2.1) or `DPoP` (RFC 9449 §7.1); schemes are
 * case-insensitive. Any other scheme is `not_bearer`.
 */
export function presentedToken(header: string | undefined): PresentedToken {
  if (header === undefined || header === '') {
    throw new MissingTokenError('missing_token', 'no bearer token in the Authorization header');
  }
  // The common spellings first: a slice, no regular expression, on every request.
  let token: string;
  let dpop = false;
  if (header.startsWith('Bearer ')) token = header.slice(7);
  else if (header.startsWith('DPoP ')) {
    token = header.slice(5);
    dpop = true;
  } else {
    const m = /^(bearer|dpop) +(.*)$/is.exec(header);
    if (!m) throw new MissingTokenError('not_bearer', 'the Authorization scheme is not Bearer or DPoP');
    dpop = m[1]!.length === 4;
    token = m[2]!;
  }
  token = token.trim();
  if (token === '') throw new InvalidTokenError('malformed_token', 'the bearer token is empty');
  if (token.includes(' '))
    throw new InvalidTokenError('malformed_token', 'the bearer token contains a space');
  return { token, dpop };
}
