// Every IdP response carries X-Content-Type-Options: nosniff, Referrer-Policy: no-referrer and a CSP with
// frame-ancestors 'none' (default-src 'none' on JSON and text). The test walks the provider's own route table,
// every method of every route plus one it does not serve, and the answers that come from elsewhere than an
// endpoint (404, malformed request target, the refused page, the consent page, redirects).
import { request } from 'node:http';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { loadIdpConfig } from '../../idp/config.ts';
import { routes } from '../../idp/routes.ts';
import { registerClient } from '../helpers/clients.ts';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import { authorizeRequest } from '../helpers/oauth.ts';
import { type IdpProcess, startIdpProcess } from '../helpers/processes.ts';

let db: TestDatabase;
let idp: IdpProcess;
let user: SeededUser;

beforeAll(async () => {
  db = await createTestDatabase();
  idp = await startIdpProcess({ databaseUrl: db.url, redisUrl: inject('redisUrl') });
  user = await seedUser(db.pool);
}, 60_000);

afterAll(async () => {
  await idp?.stop();
  await db?.drop();
});

interface Answer {
  what: string;
  status: number;
  headers: Record<string, string | string[] | undefined>;
}

/** A raw request (node:http), so that a request target fetch would refuse to send can be sent too. */
function raw(method: string, path: string, body?: string, contentType?: string): Promise<Answer> {
  const u = new URL(idp.url);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: u.hostname,
        port: u.port,
        method,
        path,
        headers: {
          ...(body !== undefined
            ? { 'content-type': contentType, 'content-length': Buffer.byteLength(body) }
            : {}),
        },
      },
      (res) => {
        res.resume();
        res.on('end', () =>
          resolve({ what: `${method} ${path}`, status: res.statusCode!, headers: res.headers }),
        );
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

function check(a: Answer) {
  const csp = String(a.headers['content-security-policy'] ?? '');
  const type = String(a.headers['content-type'] ?? '');
  const where = `${a.what} → ${a.status} ${type}`;
  expect(a.headers['x-content-type-options'], where).toBe('nosniff');
  expect(a.headers['referrer-policy'], where).toBe('no-referrer');
  expect(csp, where).toMatch(/(^|;\s*)frame-ancestors 'none'(;|$)/);
  expect(csp, where).toMatch(/(^|;\s*)default-src 'none'(;|$)/);
  expect(csp, where).not.toMatch(/unsafe-inline|unsafe-eval|script-src/);
  if (!type.startsWith('text/html')) expect(csp, where).toBe("default-src 'none'; frame-ancestors 'none'");
}

it('walks every route and method of the route table, and one method each does not serve', async () => {
  const table = routes(
    loadIdpConfig({
      PLATFORM_OIDC_ISSUER: idp.issuer,
      PLATFORM_OIDC_PRIVATE_KEY: 'unused',
      PLATFORM_AUDIENCE: idp.audience,
      DATABASE_URL: 'postgresql://unused/x',
      REDIS_URL: 'redis://unused',
    }),
  );
  expect(table.size).toBeGreaterThan(5);
  const answers: Answer[] = [];
  for (const [path, methods] of table) {
    for (const method of [...Object.keys(methods), 'PUT', 'DELETE']) {
      if (method === 'POST' || method === 'PUT') {
        answers.push(await raw(method, path, 'a=1', 'application/x-www-form-urlencoded'));
        answers.push(await raw(method, path, '{"x":1}', 'application/json'));
      } else answers.push(await raw(method, path));
    }
  }
  for (const a of answers) check(a);
  // The walk met success, client errors, 405 and redirects, not one status over and over.
  const statuses = new Set(answers.map((a) => a.status));
  for (const s of [200, 400, 405]) expect(statuses).toContain(s);
});

it('answers that do not come from an endpoint carry them too', async () => {
  const clientId = (
    await registerClient(idp.url, { client_name: 'H', redirect_uris: ['http://127.0.0.1:9/cb'] })
  ).json.client_id;
  const answers = [
    await raw('GET', '/no/such/route'),
    await raw('GET', '//%zz'),
    await raw('GET', '/oauth/authorize?client_id=nobody&redirect_uri=x'), // refused page (HTML)
    await raw('GET', '/oauth/authorize?client_id=%E0%A4%A'), // malformed parameters
  ];
  const loginRedirect = await authorizeRequest({ issuer: idp.issuer });
  const consentPage = await authorizeRequest({
    issuer: idp.issuer,
    sessionToken: user.sessionToken,
    params: { client_id: clientId, redirect_uri: 'http://127.0.0.1:9/cb' },
  });
  const decision = await authorizeRequest({
    issuer: idp.issuer,
    sessionToken: user.sessionToken,
    consent: 'deny',
    params: { client_id: clientId, redirect_uri: 'http://127.0.0.1:9/cb' },
  });
  expect(loginRedirect.status).toBe(302);
  expect(consentPage.status).toBe(200);
  expect(consentPage.res.headers.get('content-type')).toMatch(/^text\/html/);
  expect(decision.status).toBe(302);
  for (const [what, r] of [
    ['login redirect', loginRedirect],
    ['consent page', consentPage],
    ['consent decision', decision],
  ] as const) {
    answers.push({ what, status: r.status, headers: Object.fromEntries(r.res.headers) });
  }
  for (const a of answers) check(a);
  expect(answers.map((a) => a.status)).toEqual([404, 400, 400, 400, 302, 200, 302]);
});
