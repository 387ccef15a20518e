// Auth.js itself (@auth/core, a test dependency), to make the web application's JWT-strategy session cookies:
// its `encode`/`decode` and its cookie SessionStore's chunking. Loaded by a computed specifier so its type
// declarations (which bring the DOM's global types with them) stay out of the project's type check.

export interface AuthjsJwt {
  encode(o: {
    token: Record<string, unknown>;
    secret: string | string[];
    salt: string;
    maxAge?: number;
  }): Promise<string>;
  decode(o: {
    token: string;
    secret: string | string[];
    salt: string;
  }): Promise<Record<string, unknown> | null>;
}

interface SessionStoreClass {
  new (
    option: { name: string; options: Record<string, unknown> },
    cookies: Record<string, string>,
    logger: { debug(...args: unknown[]): void },
  ): { chunk(value: string, options: Record<string, unknown>): { name: string; value: string }[] };
}

const JWT_MODULE: string = '@auth/core/jwt';
// Not among the package's exports: imported by its file.
const COOKIE_MODULE: string = new URL('../../node_modules/@auth/core/lib/utils/cookie.js', import.meta.url)
  .href;

/** @auth/core's jwt module. */
export function authjsJwt(): Promise<AuthjsJwt> {
  return import(JWT_MODULE) as Promise<AuthjsJwt>;
}

/** The Cookie header a browser sends after Auth.js set this session token: one cookie, or Auth.js's chunks. */
export async function authjsCookieHeader(cookieName: string, token: string): Promise<string> {
  const { SessionStore } = (await import(COOKIE_MODULE)) as { SessionStore: SessionStoreClass };
  const store = new SessionStore({ name: cookieName, options: {} }, {}, { debug() {} });
  return store
    .chunk(token, {})
    .map((c) => `${c.name}=${c.value}`)
    .join('; ');
}
