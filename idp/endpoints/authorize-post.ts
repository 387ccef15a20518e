import { HttpInputError, readForm } from '../../lib/http.ts';
import { CONSENT_FORM_FIELDS } from '../consent.ts';
import type { Endpoint } from '../context.ts';
import { AuthorizePageError } from '../errors.ts';
import { authorizationRequest } from './authorize.ts';
import { consentDecision } from './consent.ts';

const FORM_LIMIT = 32 * 1024;

/**
 * POST /oauth/authorize, a form. Two requests share it: the consent page's answer, told apart by the fields only
 * that form carries (`decision`, `csrf_token`, `powers_named`: any one makes it an answer, which then needs its
 * CSRF token), and an authorization request sent by POST (OIDC Core §3.1.2.1), which carries none of them and is
 * handled exactly as the GET. So a POSTed authorization request can never count as an approval.
 */
export const authorizePost: Endpoint = async (ctx, x) => {
  let params: Map<string, string>;
  try {
    params = await readForm(x.req, FORM_LIMIT);
  } catch (err) {
    if (err instanceof HttpInputError) throw new AuthorizePageError(err.message, err.status);
    throw err;
  }
  if (CONSENT_FORM_FIELDS.some((f) => params.has(f))) return consentDecision(ctx, x, params);
  if (x.url.search.length > 1)
    throw new AuthorizePageError(
      'a POST authorization request carries its parameters in the body, not the URL',
    );
  await authorizationRequest(ctx, x, params);
};
