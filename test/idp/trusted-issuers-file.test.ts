// PLATFORM_TRUSTED_ISSUERS_FILE's members that tie an id-jag issuer to its own users (docs/idp.md § Trusted
// assertion issuers): email_domains and subject_provider, read and refused as the file's other members are.
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseTrustedIssuers, TrustedIssuers } from '../../idp/trusted-issuers/index.ts';
import type { Logger } from '../../lib/logger.ts';

const file = (members: string, kind = 'id-jag') => `issuers:
  - issuer: https://idp.example
    jwks_uri: https://idp.example/jwks
    kind: ${kind}
${members}`;

describe('trusted issuers: email_domains and subject_provider', () => {
  it('reads them (domains lowercased, duplicates dropped, "*" kept)', () => {
    const [i] = parseTrustedIssuers(
      file('    email_domains: [Corp.Example, corp.example, "*"]\n    subject_provider: okta\n'),
    );
    expect(i).toMatchObject({ emailDomains: ['corp.example', '*'], subjectProvider: 'okta' });
    expect(parseTrustedIssuers(file(''))[0]).not.toHaveProperty('emailDomains');
  });

  it('refuses a malformed domain, an empty list, and either member on a workload issuer, naming the problem', () => {
    expect(() => parseTrustedIssuers(file('    email_domains: ["@corp.example"]\n'))).toThrow(
      /issuers\[0\].*email_domains\.0: must be a domain name/,
    );
    expect(() => parseTrustedIssuers(file('    email_domains: []\n'))).toThrow(/email_domains/);
    expect(() => parseTrustedIssuers(file('    email_domains: [corp.example]\n', 'workload'))).toThrow(
      /email_domains applies to id-jag issuers only/,
    );
    expect(() => parseTrustedIssuers(file('    subject_provider: okta\n', 'workload'))).toThrow(
      /subject_provider applies to id-jag issuers only/,
    );
  });

  it('mayName: the listed domains; without a list, any domain no other id-jag issuer lists; a warning says so', async () => {
    const path = join(tmpdir(), `trusted-issuers-${crypto.randomUUID()}.yaml`);
    await writeFile(
      path,
      `issuers:
  - {issuer: https://corp.example, jwks_uri: https://corp.example/jwks, kind: id-jag, email_domains: [corp.example]}
  - {issuer: https://any.example, jwks_uri: https://any.example/jwks, kind: id-jag, email_domains: ["*"]}
  - {issuer: https://old.example, jwks_uri: https://old.example/jwks, kind: id-jag}
`,
    );
    const warned: string[] = [];
    const log = { info() {}, error() {}, warn: (_o: unknown, m: string) => void warned.push(m) };
    const t = await TrustedIssuers.load(path, log as unknown as Logger);
    const [corp, any, old] = ['https://corp.example', 'https://any.example', 'https://old.example'].map(
      (i) => t.find(i)!,
    );
    expect(t.mayName(corp!, 'corp.example')).toBe(true);
    expect(t.mayName(corp!, 'example.com')).toBe(false);
    expect(t.mayName(any!, 'example.com')).toBe(true);
    expect(t.mayName(any!, 'corp.example')).toBe(false);
    expect(t.mayName(old!, 'example.com')).toBe(true);
    expect(t.mayName(old!, 'CORP.example')).toBe(false);
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatch(/without email_domains/);
  });
});
