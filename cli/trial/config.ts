import {
  ConfigError,
  databaseUrl,
  type Env,
  httpUrl,
  logLevel,
  optionalString,
  port,
} from '../../lib/config.ts';

/**
 * `platform trial-sign-in`'s settings (the `trial` compose profile's `signin` service). It stands in for the web
 * application, so it connects as the web application would (the bundled Postgres's superuser, DATABASE_URL)
 * and sets the cookie the IdP reads. Every name but TRIAL_SIGN_IN_PORT is the IdP's own, so compose hands both
 * the same values.
 */
export interface TrialSignInConfig {
  port: number;
  /** The IdP's issuer: the page only sends the browser back to this origin. Loopback only (see below). */
  issuer: string;
  databaseUrl: string;
  /** The cookie the IdP reads: PLATFORM_SESSION_COOKIE, else the IdP's own default for this issuer. */
  cookieName: string;
  adminEmails: string;
  /** The email the form offers. */
  suggestedEmail: string;
  logLevel: string;
}

/** The hosts a trial may be served on: this machine only. */
const LOOPBACK_HOSTS = /^(localhost|127(\.\d{1,3}){3}|\[::1\])$/;

export const TRIAL_USER_EMAIL = 'trial@example.com';

/**
 * Refuses an issuer that is not a loopback origin: the trial's sign-in lets anyone sign in as anyone, so a
 * deployment reachable by another machine (a tunnel, a public host name, https) is not a trial and must use
 * the web application's real sign-in.
 */
export function loadTrialSignInConfig(env: Env): TrialSignInConfig {
  const issuer =
    httpUrl(env, 'PLATFORM_OIDC_ISSUER') ??
    (() => {
      throw new ConfigError('PLATFORM_OIDC_ISSUER', 'is required');
    })();
  const u = new URL(issuer);
  if (u.protocol !== 'http:' || !LOOPBACK_HOSTS.test(u.hostname)) {
    throw new ConfigError(
      'PLATFORM_OIDC_ISSUER',
      `is ${issuer}: the trial sign-in (anyone signs in as anyone, no password) runs only for a loopback http issuer such as http://localhost:8080; a deployment other machines reach is not a trial (leave the trial profile off)`,
    );
  }
  const cookie = optionalString(env, 'PLATFORM_SESSION_COOKIE');
  if (cookie !== undefined && !/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/.test(cookie))
    throw new ConfigError('PLATFORM_SESSION_COOKIE', `"${cookie}" is not a cookie name`);
  const adminEmails = optionalString(env, 'PLATFORM_ADMIN_EMAILS') ?? '';
  return Object.freeze({
    port: port(env, 'TRIAL_SIGN_IN_PORT', 3000),
    issuer,
    databaseUrl: databaseUrl(env),
    // The IdP's default for an http issuer (idp/config.ts); the loopback rule above rules https out.
    cookieName: cookie ?? 'authjs.session-token',
    adminEmails,
    suggestedEmail: adminEmails.split(',')[0]?.trim() || TRIAL_USER_EMAIL,
    logLevel: logLevel(env),
  });
}
