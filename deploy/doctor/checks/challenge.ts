import { randomUUID } from 'node:crypto';
import { type CheckRow, fail, pass } from '../result.ts';
import {
  describeResponse,
  errorBody,
  guarded,
  INITIALIZE_BODY,
  MCP_POST_HEADERS,
  metadataUrlOf,
  resourceOf,
  type ServiceTarget,
} from './target.ts';

const RESOURCE_METADATA = /resource_metadata="([^"]*)"/;

/**
 * #4: `POST /<SERVICE>/mcp` without a bearer is 401 MISSING_TOKEN, and `WWW-Authenticate` names the metadata
 * (`resource_metadata`) a connector uses to find where to sign in.
 */
export function checkMissingBearer(t: ServiceTarget): Promise<CheckRow> {
  const id = { ref: '#4', subject: t.service, name: 'POST /mcp without bearer → 401' };
  const url = resourceOf(t);
  return guarded(id, async () => {
    const res = await t.probe(url, {
      method: 'POST',
      headers: { ...MCP_POST_HEADERS },
      body: INITIALIZE_BODY,
    });
    if (res.status !== 401) return fail(id, `POST ${url} answered ${describeResponse(res)}, expected 401`);
    const problems: string[] = [];
    const challenge = res.headers.get('www-authenticate');
    const expected = metadataUrlOf(t);
    if (challenge === undefined || !/^bearer\b/i.test(challenge)) {
      problems.push(
        `WWW-Authenticate is ${challenge === undefined ? 'missing' : `"${challenge}"`}, expected a Bearer challenge`,
      );
    } else {
      const named = RESOURCE_METADATA.exec(challenge)?.[1];
      if (named === undefined) problems.push(`WWW-Authenticate carries no resource_metadata: "${challenge}"`);
      else if (named !== expected) problems.push(`resource_metadata is "${named}", expected "${expected}"`);
    }
    const code = errorBody(res)?.code;
    if (code !== 'MISSING_TOKEN')
      problems.push(`error.code is ${JSON.stringify(code)}, expected "MISSING_TOKEN"`);
    if (problems.length > 0) return fail(id, problems.join('; '));
    return pass(id, `401 MISSING_TOKEN; resource_metadata="${expected}"`);
  });
}

/** #5: a forged bearer is 401 INVALID_TOKEN with the failure reason in `error.context.reason`. */
export function checkFakeBearer(t: ServiceTarget): Promise<CheckRow> {
  const id = { ref: '#5', subject: t.service, name: 'fake bearer → 401 with reason' };
  const url = resourceOf(t);
  return guarded(id, async () => {
    const res = await t.probe(url, {
      method: 'POST',
      headers: { ...MCP_POST_HEADERS, authorization: `Bearer ${fakeToken(url)}` },
      body: INITIALIZE_BODY,
    });
    if (res.status !== 401) return fail(id, `POST ${url} answered ${describeResponse(res)}, expected 401`);
    const e = errorBody(res);
    const reason = e?.context?.reason;
    const problems: string[] = [];
    if (typeof reason !== 'string' || reason.trim() === '')
      problems.push('error.context.reason is missing or empty');
    if (e?.code !== 'INVALID_TOKEN')
      problems.push(`error.code is ${JSON.stringify(e?.code)}, expected "INVALID_TOKEN"`);
    if (!/error="invalid_token"/.test(res.headers.get('www-authenticate') ?? '')) {
      problems.push('WWW-Authenticate lacks error="invalid_token"');
    }
    if (problems.length > 0) return fail(id, problems.join('; '));
    return pass(id, `401 INVALID_TOKEN; reason "${reason as string}"`);
  });
}

/**
 * A well-formed JWT from an issuer nobody trusts, with no valid signature: it reaches the issuer dispatch (the
 * path a real forgery takes) without making the gateway refetch anyone's key set.
 */
function fakeToken(audience: string): string {
  const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
  const now = Math.floor(Date.now() / 1000);
  const header = { alg: 'RS256', typ: 'JWT' };
  const payload = {
    iss: 'https://platform-doctor.invalid',
    sub: 'platform-doctor',
    aud: audience,
    iat: now,
    exp: now + 300,
    jti: randomUUID(),
  };
  return `${b64(header)}.${b64(payload)}.${Buffer.from('not a signature').toString('base64url')}`;
}
