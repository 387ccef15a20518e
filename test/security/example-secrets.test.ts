// Red team: "the example secrets of deploy/env.example are accepted" — a deployment that copied env.example (or a
// documentation snippet) runs with secrets everyone knows: forge identity headers with the example
// GATEWAY_IDENTITY_SECRET, sign in to the database with `change-me`. Every server now refuses them at start-up
// with one line naming the variable. The first half finds every example secret the project publishes (env.example
// and every code block of README.md and docs/*.md), so an example added later must be added to the list too.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, inject, it } from 'vitest';
import { EXAMPLE_SECRETS, isExampleSecret } from '../../lib/example-secrets.ts';
import { startPlatform, testSigningKeyPem } from '../helpers/processes.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** A variable that holds a secret, or a URL whose password is one. */
const SECRET_NAME = /^[A-Z][A-Z0-9_]*(?:SECRET|PASSWORD|_KEY)$/;
const URL_NAME = /^(?:[A-Z0-9_]*_)?(?:DATABASE_URL|REDIS_URL)$/;
/** `NAME=value`, `export NAME=value`, `NAME: value` (compose, YAML), `-e NAME=value`. */
const ASSIGNMENT = /(?:^|\s)(?:export\s+|-e\s+)?([A-Z][A-Z0-9_]*)(?:=|:\s+)("[^"]*"|'[^']*'|\S+)?/;

interface Example {
  where: string;
  name: string;
  value: string;
}

function unquote(v: string): string {
  const t = v.trim();
  return /^(["']).*\1$/.test(t) ? t.slice(1, -1) : t;
}

/** Values that only say where a secret goes: `$(openssl …)`, `${VAR}`, `<secret>`, `…`, `***`, empty. */
function placeholder(v: string): boolean {
  return v === '' || /\$|^<.*>$|…|\.\.\.|^\*+$/.test(v);
}

function examplesIn(where: string, lines: string[]): Example[] {
  const out: Example[] = [];
  for (const line of lines) {
    const m = ASSIGNMENT.exec(line.trim());
    if (!m) continue;
    const [, name = '', raw = ''] = m;
    const value = unquote(raw);
    if (SECRET_NAME.test(name)) {
      if (!placeholder(value)) out.push({ where, name, value });
    } else if (URL_NAME.test(name)) {
      let password = '';
      try {
        password = decodeURIComponent(new URL(value).password);
      } catch {
        // not a URL (a description, a placeholder)
      }
      if (!placeholder(password)) out.push({ where, name, value: password });
    }
  }
  return out;
}

/** The lines inside the fenced code blocks of a Markdown file. */
function codeBlockLines(text: string): string[] {
  const out: string[] = [];
  let inside = false;
  for (const line of text.split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) inside = !inside;
    else if (inside) out.push(line);
  }
  return out;
}

function publishedExamples(): Example[] {
  const env = examplesIn(
    'deploy/env.example',
    readFileSync(join(ROOT, 'deploy/env.example'), 'utf8').split('\n'),
  );
  const docs = [
    'README.md',
    ...readdirSync(join(ROOT, 'docs'))
      .filter((f) => f.endsWith('.md'))
      .map((f) => `docs/${f}`),
  ];
  return [...env, ...docs.flatMap((d) => examplesIn(d, codeBlockLines(readFileSync(join(ROOT, d), 'utf8'))))];
}

describe('the list of example secrets', () => {
  it('holds every example secret env.example and the documentation publish', () => {
    const found = publishedExamples();
    // env.example alone: POSTGRES_PASSWORD, the three database role passwords, the three Redis passwords,
    // PLATFORM_OIDC_PRIVATE_KEY, GATEWAY_IDENTITY_SECRET and the three tool identity keys.
    expect(found.filter((e) => e.where === 'deploy/env.example').length).toBeGreaterThanOrEqual(7);
    const missing = found.filter((e) => !isExampleSecret(e.value)).map((e) => `${e.where}: ${e.name}`);
    expect(missing, 'add these values to lib/example-secrets.ts').toEqual([]);
  });

  it('finds them in code blocks in every spelling the docs use', () => {
    const block = [
      '```sh',
      'export GATEWAY_IDENTITY_SECRET="s3cr3t-from-a-doc"',
      'MAIL_MCP_SHARED_SECRET=another-one # comment',
      '    REDIS_URL: redis://gateway:pw-in-yaml@redis:6379/0',
      'docker run -e TOOL_IDENTITY_KEY=abc123 image',
      'GATEWAY_IDENTITY_SECRET=$(openssl rand -base64 48)',
      'DATABASE_URL=postgresql://app:***@db:5432/app',
      '```',
    ].join('\n');
    expect(examplesIn('x', codeBlockLines(block)).map((e) => [e.name, e.value])).toEqual([
      ['GATEWAY_IDENTITY_SECRET', 's3cr3t-from-a-doc'],
      ['MAIL_MCP_SHARED_SECRET', 'another-one'],
      ['REDIS_URL', 'pw-in-yaml'],
      ['TOOL_IDENTITY_KEY', 'abc123'],
    ]);
  });

  it('treats a re-wrapped key as the same value, and an unreplaced change-me… as one', () => {
    for (const v of EXAMPLE_SECRETS) expect(isExampleSecret(` ${v.slice(0, 8)}\n${v.slice(8)} `)).toBe(true);
    expect(isExampleSecret('Change-Me-please')).toBe(true);
    expect(isExampleSecret('gateway-test-identity-secret-0123456789abcdef')).toBe(false);
  });
});

/** The one line a refused start prints: the variable named, the value never. */
async function refusedStart(args: string[], env: Record<string, string>, variable: string, value: string) {
  const p = startPlatform(args, env);
  // A start that is not refused keeps running: stopped here rather than left behind.
  let timer: NodeJS.Timeout | undefined;
  const code = await Promise.race([
    p.exited,
    new Promise<string>((resolve) => {
      timer = setTimeout(() => resolve('still running'), 10_000);
    }),
  ]);
  clearTimeout(timer);
  if (code === 'still running') p.child.kill('SIGKILL');
  const lines = p.output().trim().split('\n');
  expect({ args, variable, code }).toEqual({ args, variable, code: 2 });
  expect(lines, p.output()).toHaveLength(1);
  expect(lines[0]).toMatch(new RegExp(`^platform: configuration error: ${variable}: .*example value`));
  expect(p.output()).not.toContain(value);
}

describe('a server started with an example secret', () => {
  const envExample = Object.fromEntries(
    readFileSync(join(ROOT, 'deploy/env.example'), 'utf8')
      .split('\n')
      .map((l) => /^([A-Z0-9_]+)=(.*)$/.exec(l))
      .filter((m) => m !== null)
      .map((m) => [m[1]!, m[2]!]),
  );
  const db = () => inject('databaseUrl');
  const redis = () => inject('redisUrl');
  const withPassword = (url: string, password: string) => {
    const u = new URL(url);
    u.username ||= 'platform';
    u.password = password;
    return u.toString();
  };

  it('the gateway refuses GATEWAY_IDENTITY_SECRET, a service HS256 secret and a Redis password', async () => {
    const base = {
      PUBLIC_BASE_URL: 'https://mcp.example.test',
      GATEWAY_SERVICES: 'mail',
      MAIL_MCP_UPSTREAM: 'http://127.0.0.1:1',
      GATEWAY_IDENTITY_SECRET: 'example-secrets-test-identity-secret-0123456789',
      REDIS_URL: redis(),
    };
    const secret = envExample.GATEWAY_IDENTITY_SECRET!;
    await refusedStart(
      ['gateway'],
      { ...base, GATEWAY_IDENTITY_SECRET: secret },
      'GATEWAY_IDENTITY_SECRET',
      secret,
    );
    await refusedStart(
      ['gateway'],
      { ...base, MAIL_MCP_SHARED_SECRET: secret },
      'MAIL_MCP_SHARED_SECRET',
      secret,
    );
    await refusedStart(
      ['gateway'],
      { ...base, REDIS_URL: withPassword(redis(), 'change-me') },
      'REDIS_URL',
      'change-me',
    );
  });

  it('the IdP refuses PLATFORM_OIDC_PRIVATE_KEY, and example passwords in DATABASE_URL and REDIS_URL', async () => {
    const base = {
      IDP_PORT: '0',
      PLATFORM_OIDC_ISSUER: 'http://127.0.0.1:1',
      PLATFORM_OIDC_PRIVATE_KEY: testSigningKeyPem(),
      PLATFORM_AUDIENCE: 'https://platform.test/api',
      DATABASE_URL: db(),
      REDIS_URL: redis(),
    };
    const key = envExample.PLATFORM_OIDC_PRIVATE_KEY!;
    await refusedStart(
      ['idp'],
      { ...base, PLATFORM_OIDC_PRIVATE_KEY: key },
      'PLATFORM_OIDC_PRIVATE_KEY',
      key,
    );
    await refusedStart(
      ['idp'],
      { ...base, DATABASE_URL: withPassword(db(), envExample.PLATFORM_IDP_DB_PASSWORD!) },
      'DATABASE_URL',
      envExample.PLATFORM_IDP_DB_PASSWORD!,
    );
    await refusedStart(
      ['idp'],
      { ...base, REDIS_URL: withPassword(redis(), 'change-me') },
      'REDIS_URL',
      'change-me',
    );
  });

  it("each tool server refuses env.example's identity key, an example database password and Graph secret", async () => {
    for (const service of ['platform', 'mail', 'deals']) {
      const key = envExample[`${service.toUpperCase()}_TOOL_IDENTITY_KEY`]!;
      await refusedStart(
        ['tool', service],
        { DATABASE_URL: db(), TOOL_IDENTITY_KEY: key },
        'TOOL_IDENTITY_KEY',
        key,
      );
    }
    const own = 'ab'.repeat(32);
    await refusedStart(
      ['tool', 'deals'],
      { DATABASE_URL: withPassword(db(), envExample.PLATFORM_TOOLS_DB_PASSWORD!), TOOL_IDENTITY_KEY: own },
      'DATABASE_URL',
      envExample.PLATFORM_TOOLS_DB_PASSWORD!,
    );
    await refusedStart(
      ['tool', 'mail'],
      {
        DATABASE_URL: db(),
        TOOL_IDENTITY_KEY: own,
        GRAPH_TENANT_ID: 'contoso.example',
        GRAPH_CLIENT_ID: 'client',
        GRAPH_CLIENT_SECRET: 'change-me',
      },
      'GRAPH_CLIENT_SECRET',
      'change-me',
    );
  });
});
