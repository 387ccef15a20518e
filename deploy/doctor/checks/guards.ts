import { type CheckRow, fail, pass } from '../result.ts';
import {
  describeResponse,
  guarded,
  INITIALIZE_BODY,
  MCP_POST_HEADERS,
  resourceOf,
  type ServiceTarget,
} from './target.ts';

// Names under .invalid (RFC 2606) can never be a real host or origin of anyone's deployment.
export const FOREIGN_HOST = 'platform-doctor.invalid';
export const FOREIGN_ORIGIN = 'https://platform-doctor.invalid';

/**
 * Host guard (the spec's 421 "Invalid Host header", the DNS-rebinding defence): a request for the public path
 * carrying a foreign Host must be refused before authentication. The gateway answers 421; a tunnel or proxy
 * in front may refuse an unknown host itself (Cloudflare, say, with a 4xx of its own), which protects the
 * service just as well, so any refusal but 401 passes and says who refused. A 401 means the request reached
 * the bearer check: nothing looked at the Host.
 */
export function checkHostGuard(t: ServiceTarget): Promise<CheckRow> {
  const id = { ref: '-', subject: t.service, name: 'foreign Host refused (421)' };
  const url = resourceOf(t);
  return guarded(id, async () => {
    const res = await t.probe(url, {
      method: 'POST',
      headers: { ...MCP_POST_HEADERS, host: FOREIGN_HOST },
      body: INITIALIZE_BODY,
    });
    if (res.status === 421) return pass(id, `421 for Host: ${FOREIGN_HOST}`);
    if (res.status >= 400 && res.status < 500 && res.status !== 401) {
      return pass(id, `${describeResponse(res)} for Host: ${FOREIGN_HOST} (refused in front of the gateway)`);
    }
    const why = res.status === 401 ? ': the request reached authentication, no Host guard' : '';
    return fail(id, `Host: ${FOREIGN_HOST} answered ${describeResponse(res)}, expected 421${why}`);
  });
}

/** Origin guard: a browser request from a foreign page is refused with 403 before authentication. */
export function checkOriginGuard(t: ServiceTarget): Promise<CheckRow> {
  const id = { ref: '-', subject: t.service, name: 'foreign Origin refused (403)' };
  const url = resourceOf(t);
  return guarded(id, async () => {
    const res = await t.probe(url, {
      method: 'POST',
      headers: { ...MCP_POST_HEADERS, origin: FOREIGN_ORIGIN },
      body: INITIALIZE_BODY,
    });
    if (res.status === 403) return pass(id, `403 for Origin: ${FOREIGN_ORIGIN}`);
    const why = res.status === 401 ? ': the request reached authentication, no Origin guard' : '';
    return fail(id, `Origin: ${FOREIGN_ORIGIN} answered ${describeResponse(res)}, expected 403${why}`);
  });
}
