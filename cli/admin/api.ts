import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { withDpop } from '@modelcontextprotocol/client';
import type { Command } from 'commander';
import { readCredentials } from '../client/credentials.ts';
import type { DpopKey } from '../client/dpop.ts';
import { CliError, describeError, isUnreachable, LOGIN_HINT } from '../client/errors.ts';
import type { Io } from '../client/io.ts';
import { FROM_STORED_LOGIN } from '../client/oidc.ts';
import type { ClientConfig } from '../config.ts';
import { presentedToken, renewAccessToken } from '../token.ts';

/** Seconds a JSON request to the admin API may take. Exports stream for as long as rows keep coming. */
const REQUEST_TIMEOUT_MS = 15_000;
export const ADMIN_SCOPE = 'platform:admin';

export type Query = Record<string, string | number | undefined>;

/** What cli/admin.ts hands a group of `platform admin` subcommands to register them with. */
export interface AdminCommandKit<Flags> {
  command: (name: string, description: string) => Command;
  act: (fn: (api: AdminApi, flags: Flags) => Promise<void>) => (flags: Flags) => Promise<void>;
  io: Io;
}

/**
 * The one door into the IdP for `platform admin`: its admin API (`/admin/api/…`) over HTTP with a platform
 * access token carrying `platform:admin`. Nothing here reads the IdP's database or Redis.
 */
export class AdminApi {
  readonly issuer: string;
  readonly #from: string;
  #token: string;
  /** The scope of the stored login, when the token came from it (for a useful hint on 403). */
  readonly #storedScope: string | undefined;
  /** Set when the token came from the stored login, which can be refreshed once if the IdP refuses it. */
  readonly #renew: (() => Promise<string>) | undefined;
  /** Bearer, or for a DPoP-bound token `Authorization: DPoP` plus a fresh proof per request (nonce retried once). */
  readonly #fetchImpl: typeof fetch;

  private constructor(opts: {
    issuer: string;
    from: string;
    token: string;
    dpop?: DpopKey;
    storedScope?: string;
    renew?: (rejected: string) => Promise<string>;
  }) {
    this.issuer = opts.issuer;
    this.#fetchImpl = opts.dpop
      ? (withDpop(opts.dpop.session, () => this.#token)(fetch) as typeof fetch)
      : (url, init) => {
          const headers = new Headers(init?.headers);
          headers.set('authorization', `Bearer ${this.#token}`);
          return fetch(url, { ...init, headers });
        };
    this.#from = opts.from;
    this.#token = opts.token;
    this.#storedScope = opts.storedScope;
    const renew = opts.renew;
    this.#renew = renew ? () => renew(this.#token) : undefined;
  }

  /**
   * The token: `--token` / PLATFORM_TOKEN, else the stored login's (refreshed as `platform token` does). The
   * IdP: `--issuer` / PLATFORM_ISSUER, else the issuer of the stored login (the one that issued its token),
   * else http://localhost:4000.
   */
  static async connect(config: ClientConfig, io: Io): Promise<AdminApi> {
    const stored = config.token
      ? undefined
      : await readCredentials(config.credentialsPath).catch(() => undefined);
    const { token, dpop } = await presentedToken(config, io);
    const [issuer, from] =
      !config.issuerGiven && stored ? [stored.issuer, FROM_STORED_LOGIN] : [config.issuer, config.issuerFrom];
    return new AdminApi({
      issuer,
      from,
      token,
      dpop,
      storedScope: stored?.scope,
      renew: config.token ? undefined : (rejected) => renewAccessToken(config, io, rejected),
    });
  }

  /** A JSON request; an answer other than 2xx becomes one CliError line. */
  async json<T>(method: string, path: string, opts: { query?: Query; body?: unknown } = {}): Promise<T> {
    const res = await this.#fetch(method, path, opts, AbortSignal.timeout(REQUEST_TIMEOUT_MS));
    const text = await res.text();
    try {
      return JSON.parse(text) as T;
    } catch {
      throw new CliError('CALL_FAILED', `${this.#url(path)} answered ${res.status} with no JSON body`);
    }
  }

  /** An export, written to `out` as it arrives. */
  async stream(path: string, query: Query, out: NodeJS.WritableStream): Promise<void> {
    const res = await this.#fetch('GET', path, { query });
    if (!res.body) return;
    await pipeline(Readable.fromWeb(res.body as import('node:stream/web').ReadableStream), out, {
      end: false,
    });
  }

  #url(path: string, query: Query = {}): string {
    const url = new URL(`${this.issuer}/admin/api/${path}`);
    for (const [k, v] of Object.entries(query)) if (v !== undefined) url.searchParams.set(k, String(v));
    return url.href;
  }

  async #fetch(
    method: string,
    path: string,
    opts: { query?: Query; body?: unknown },
    signal?: AbortSignal,
  ): Promise<Response> {
    const url = this.#url(path, opts.query);
    let res: Response;
    try {
      res = await this.#send(url, method, opts.body, signal);
      // The stored login's access token revoked (an administrator may well revoke their own): refresh once,
      // as `platform call` does. A 401 is answered before the IdP acts, so sending again repeats nothing.
      if (res.status === 401 && this.#renew) {
        await res.body?.cancel();
        this.#token = await this.#renew();
        res = await this.#send(url, method, opts.body, signal);
      }
    } catch (err) {
      if (err instanceof CliError) throw err;
      const where = `${this.issuer} (${this.#from})`;
      throw new CliError(
        'UNREACHABLE',
        isUnreachable(err)
          ? `cannot reach the IdP at ${where}: ${describeError(err)}`
          : `the IdP at ${where} failed: ${describeError(err)}`,
        { cause: err },
      );
    }
    if (res.ok) return res;
    throw await this.#refusal(res, url);
  }

  #send(url: string, method: string, body: unknown, signal: AbortSignal | undefined): Promise<Response> {
    return this.#fetchImpl(url, {
      method,
      signal,
      headers: {
        accept: 'application/json',
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  }

  /** The IdP's `{error, error_description}` as one line, with what to do about it. */
  async #refusal(res: Response, url: string): Promise<CliError> {
    let error = `HTTP ${res.status}`;
    let description = '';
    try {
      const body = (await res.json()) as { error?: unknown; error_description?: unknown };
      if (typeof body.error === 'string') error = body.error;
      if (typeof body.error_description === 'string') description = body.error_description;
    } catch {
      // not the IdP's JSON (a proxy's page, say): the status says enough
    }
    const detail = description ? `${error}: ${description}` : error;
    if (res.status === 401) {
      return new CliError('CALL_FAILED', `the IdP refused the token (${detail}); ${LOGIN_HINT}`);
    }
    if (res.status === 403) {
      const hint =
        this.#storedScope !== undefined && !this.#storedScope.split(' ').includes(ADMIN_SCOPE)
          ? `; the stored login was not granted ${ADMIN_SCOPE}: an administrator is a user whose email is in the IdP's PLATFORM_ADMIN_EMAILS, who then runs \`platform login\` again (in a browser: a \`--device\` login never carries it)`
          : '';
      return new CliError('CALL_FAILED', `not allowed (${detail})${hint}`);
    }
    if (res.status === 404 && error === 'not_found')
      return new CliError('CALL_FAILED', description || detail);
    if (res.status === 404) {
      return new CliError(
        'CALL_FAILED',
        `${url} answered 404: is ${this.issuer} a platform IdP with the admin API?`,
      );
    }
    return new CliError('CALL_FAILED', `${url} answered ${res.status}: ${detail}`);
  }
}
