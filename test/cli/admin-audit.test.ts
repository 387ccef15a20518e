// `platform admin audit`: filters, the cursor, the JSON-lines and CSV exports, and the audit of administration
// itself, through the real CLI and the admin API of a real `platform idp`.
import { decodeJwt } from 'jose';
import { beforeAll, describe, expect, it } from 'vitest';
import { registerClient } from '../helpers/clients.ts';
import { type SeededUser, seedUser } from '../helpers/database.ts';
import { refresh, signIn } from '../helpers/oauth.ts';
import { adminStack } from './admin-support.ts';

const st = adminStack();

describe('platform admin audit', () => {
  let carol: SeededUser;
  let clientId: string;
  beforeAll(async () => {
    carol = await seedUser(st.db.pool, { email: 'carol@example.com' });
    const first = await signIn(st.idp.issuer, carol.sessionToken, { scope: 'openid mcp:mail' });
    await refresh(st.idp.issuer, first.refresh_token);
    const reg = await registerClient(st.idp.issuer, {
      client_name: 'Audit Probe',
      redirect_uris: ['http://127.0.0.1:40111/callback'],
    });
    clientId = reg.json.client_id;
    await signIn(st.idp.issuer, carol.sessionToken, {
      client_id: clientId,
      redirect_uri: 'http://127.0.0.1:40111/callback',
      scope: 'openid mcp:deals',
    });
  });

  it('lists issuances newest first, filtered by email, client, service and time', async () => {
    const all = await st.admin(['audit', '--email', 'Carol@Example.com', '--json']);
    expect(all.code, all.stderr).toBe(0);
    const rows = JSON.parse(all.stdout) as Array<Record<string, string>>;
    expect(rows.map((x) => [x.event, x.grant_type, x.client_id, x.scope])).toEqual([
      ['issued', 'authorization_code', clientId, 'openid mcp:deals'],
      ['issued', 'refresh_token', 'platform-cli', 'openid mcp:mail'],
      ['issued', 'authorization_code', 'platform-cli', 'openid mcp:mail'],
    ]);
    expect(rows.every((x) => x.email === 'carol@example.com')).toBe(true);

    const byClient = JSON.parse((await st.admin(['audit', '--client', clientId, '--json'])).stdout);
    expect(byClient.map((x: { client_id: string }) => x.client_id)).toEqual([clientId]);
    const byService = JSON.parse(
      (await st.admin(['audit', '--email', 'carol@example.com', '--service', 'mail', '--json'])).stdout,
    );
    expect(byService).toHaveLength(2);
    const future = JSON.parse((await st.admin(['audit', '--since', '2999-01-01', '--json'])).stdout);
    expect(future).toEqual([]);
    const recent = JSON.parse(
      (await st.admin(['audit', '--email', 'carol@example.com', '--since', '1h', '--limit', '2', '--json']))
        .stdout,
    );
    expect(recent.map((x: { id: string }) => x.id)).toEqual(rows.slice(0, 2).map((x) => x.id));

    const table = await st.admin(['audit', '--email', 'carol@example.com']);
    const lines = table.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^time\s+event\s+email\s+client\s+jti \/ target\s+scope$/);
    expect(lines).toHaveLength(4);
    expect(lines[1]).toContain(clientId);
  });

  it('pages with a cursor that stays stable while rows arrive', async () => {
    const first = JSON.parse((await st.api('audit?email=carol@example.com&limit=2')).text);
    expect(first.items).toHaveLength(2);
    expect(typeof first.next_cursor).toBe('string');
    await signIn(st.idp.issuer, carol.sessionToken, { scope: 'openid' }); // a newer row must not shift the pages
    const second = JSON.parse(
      (await st.api(`audit?email=carol@example.com&limit=2&cursor=${first.next_cursor}`)).text,
    );
    expect(second.items.map((x: { grant_type: string }) => x.grant_type)).toEqual(['authorization_code']);
    expect(second.next_cursor).toBeNull();
    const ids = [...first.items, ...second.items].map((x: { id: string }) => x.id);
    expect(new Set(ids).size).toBe(3);
  });

  it('exports everything as JSON lines and CSV, streamed', async () => {
    const jsonl = await st.admin(['audit', '--email', 'carol@example.com', '--format', 'jsonl']);
    expect(jsonl.code, jsonl.stderr).toBe(0);
    const lines = jsonl.stdout
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines).toHaveLength(4);
    expect(lines.every((l) => l.email === 'carol@example.com')).toBe(true);

    const csv = await st.api('audit.csv?email=carol@example.com');
    expect(csv.status).toBe(200);
    expect(csv.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    const rows = csv.text.trimEnd().split('\r\n');
    expect(rows[0]).toBe(
      'id,at,event,email,subject,client_id,grant_type,jti,scope,expires_at,target,detail,request_id',
    );
    expect(rows).toHaveLength(5);
    expect(
      (
        await st.admin(['audit', '--email', 'carol@example.com', '--format', 'csv', '--limit', '1'])
      ).stdout.split('\r\n'),
    ).toHaveLength(3);
  });

  it('an export larger than one read batch arrives whole, in order, rows of the same instant included', async () => {
    // 2500 issuances at one and the same instant: only the (time, record, id) position keeps batches apart.
    await st.db.pool.query(
      `INSERT INTO platform.issuance_audit (issued_at, jti, grant_type, user_id, subject, email, client_id, scope, expires_at)
       SELECT '2026-01-01T00:00:00Z', gen_random_uuid(), 'refresh_token', 'u', 'bulk-sub', 'bulk@example.com',
              'platform-cli', 'openid', '2026-01-01T01:00:00Z'
         FROM generate_series(1, 2500)`,
    );
    const r = await st.admin(['audit', '--email', 'bulk@example.com', '--format', 'jsonl']);
    expect(r.code, r.stderr).toBe(0);
    const ids = r.stdout
      .trimEnd()
      .split('\n')
      .map((l) => Number((JSON.parse(l) as { id: string }).id.split(':')[1]));
    expect(ids).toHaveLength(2500);
    expect(ids).toEqual([...ids].sort((a, b) => b - a));
    expect(new Set(ids).size).toBe(2500);
    const paged = JSON.parse(
      (await st.admin(['audit', '--email', 'bulk@example.com', '--limit', '1200', '--json'])).stdout,
    );
    expect(paged.map((x: { id: string }) => Number(x.id.split(':')[1]))).toEqual(ids.slice(0, 1200));
  });

  it('a cell a spreadsheet would run as a formula is defused in the CSV', async () => {
    const user = await seedUser(st.db.pool, { email: '=cmd@example.com' });
    await signIn(st.idp.issuer, user.sessionToken, { scope: 'openid' });
    const csv = await st.api(`audit.csv?email=${encodeURIComponent('=cmd@example.com')}`);
    expect(csv.text.split('\r\n')[1]).toContain(",'=cmd@example.com,");
  });

  it('refuses unknown or malformed filters with invalid_request', async () => {
    for (const q of [
      'emial=x',
      'limit=0',
      'limit=501',
      'since=yesterday',
      'service=Mail',
      'cursor=abc',
      'email=a&email=b',
    ]) {
      const r = await st.api(`audit?${q}`);
      expect(r.status, q).toBe(400);
      expect(JSON.parse(r.text).error).toBe('invalid_request');
    }
  });

  it('writes every administrative action to the audit, with who did it', async () => {
    const user = await seedUser(st.db.pool);
    const { jti } = decodeJwt((await signIn(st.idp.issuer, user.sessionToken)).access_token);
    await st.admin(['revoke-token', '--jti', String(jti)]);
    const mine = JSON.parse((await st.admin(['audit', '--email', st.root.email, '--json'])).stdout) as Array<
      Record<string, unknown>
    >;
    const action = mine.find((x) => x.event === 'revoke-token' && x.target === jti);
    expect(action).toMatchObject({ email: st.root.email, subject: st.root.sub, client_id: 'platform-cli' });
    expect(mine.some((x) => x.event === 'read-audit')).toBe(true);
  });
});
