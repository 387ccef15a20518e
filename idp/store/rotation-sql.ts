import { IAT_SQL, isBlockedSql } from './transaction.ts';

// The refresh-token store's statements (idp/store/refresh-tokens.ts runs them): the rotating statement for one
// token and for the tokens of one event-loop turn, the family lock, and the parts both build on.

/** How long an access token lives (its `exp` is `iat` + this). */
export const ACCESS_TTL_SECONDS = 3600;

export const REFRESH_TTL_SECONDS = 30 * 24 * 3600;

/** The web application's users table (schema-qualified) and the SQL type of its id, to refuse deleted users. */
export interface UsersTable {
  name: string;
  idType: string;
}

export function rotationStatements(usersTable: UsersTable | undefined) {
  // A refresh re-reads the user (alias r is the refresh token row): a deleted user, or one left without an
  // email, gets invalid_grant; a changed email is carried by the new tokens and the new refresh token.
  const userRow = usersTable
    ? `FROM ${usersTable.name} u WHERE u.id = r.user_id::${usersTable.idType}`
    : undefined;
  const userExists = userRow
    ? `AND EXISTS (SELECT 1 ${userRow} AND u.email IS NOT NULL AND trim(u.email) <> '')`
    : '';
  const currentEmail = userRow ? `COALESCE((SELECT lower(trim(u.email)) ${userRow}), r.email)` : 'r.email';

  // The audit row of the access token issued with the refresh token `from` names; `p` maps its values to SQL.
  const auditInsert = (from: string, p: { jti: string; iat: string; grantType: string; scope: string }) => `
    INSERT INTO platform.issuance_audit
           (issued_at, jti, grant_type, user_id, subject, email, client_id, scope, expires_at, family_id)
    SELECT to_timestamp(${p.iat}), ${p.jti}, ${p.grantType}, user_id, subject, email, client_id,
           COALESCE(${p.scope}, scope), to_timestamp(${p.iat} + ${ACCESS_TTL_SECONDS}), family_id FROM ${from}`;

  // The successor of the refresh token the CTE `old` returns (its grant carried over); `p` maps the new id and hash
  // and the rotated token's id to SQL.
  const successorInsert = (p: { id: string; hash: string; rotatedFrom: string }) => `
    INSERT INTO platform.refresh_tokens
           (id, token_hash, family_id, user_id, subject, email, client_id, scope, auth_time, email_verified, expires_at,
            rotated_from)
    SELECT ${p.id}, ${p.hash}, family_id, user_id, subject, email, client_id, scope, auth_time, email_verified,
           now() + interval '${REFRESH_TTL_SECONDS} seconds', ${p.rotatedFrom} FROM old`;

  // A refresh family's state as the rotations check it (alias f).
  const familyColumns = `f.id, f.revoked_at IS NOT NULL AS family_revoked, ${isBlockedSql('f.email')} AS blocked, f.dpop_jkt`;

  // The family row is locked (FOR SHARE) and checked in the same statement that rotates: a revocation that
  // updated it first makes this statement wait, re-check `revoked_at IS NULL` on the new row version and
  // rotate nothing; one that comes later waits for this statement's commit and then sees its successor.
  // $1 hash · $2 new id · $3 new hash · $4 jti · $5 grant type · $6 narrowed scope · $7 client · $8 the DPoP
  // proof's key (a bound family needs its own); iat is now(): the statement's start, or the caller's transaction's.
  const familyLocked = (
    mode: 'SHARE' | 'NO KEY UPDATE',
    familyId = '(SELECT t.family_id FROM platform.refresh_tokens t WHERE t.token_hash = $1)',
  ) => `
    SELECT ${familyColumns}
      FROM platform.refresh_families f
     WHERE f.id = ${familyId}
       FOR ${mode} OF f`;
  // The rotating statement's common table expressions, then what it returns: the grant, or (fastRotateWithEnt)
  // the grant and the user's entity grants (idp/entity-grants: `email = $1` FOR SHARE) by the email the rotation
  // returns, read and locked inside the rotating statement (as the managed path reads them inside its
  // transaction): an ungrant's DELETE waits for this statement, and its cut-off search then finds its audit row.
  // Like every reader of the grants, in id order (idp/entity-grants ungrant says why).
  //
  // The token row is found once, by its unique hash (tok), and updated by the row version found (ctid), not by
  // `token_hash = $1` again: the update's `revoked_at IS NULL` implies the predicate of the partial indexes on
  // refresh_tokens (email, user, subject), and until the table's first ANALYZE those indexes (built empty) look
  // free to read whole, so the planner chose to scan every live token's entry on every rotation. A row version
  // that changed after the statement's snapshot (a rotation or revocation committed in between) is re-read and
  // re-checked under the same conditions, and fails them: the slow path then decides.
  const rotateCtes = `
    WITH tok AS (SELECT t.ctid, t.family_id FROM platform.refresh_tokens t WHERE t.token_hash = $1),
    fam AS (${familyLocked('SHARE', '(SELECT family_id FROM tok)')}),
    old AS (
      UPDATE platform.refresh_tokens r
         SET rotated_to = $2, rotated_at = now(), rotations = 1
       WHERE r.ctid = (SELECT ctid FROM tok) AND r.token_hash = $1
         AND r.family_id = (SELECT id FROM fam WHERE NOT family_revoked AND NOT blocked
                                                 AND (dpop_jkt IS NULL OR dpop_jkt = $8::text))
         AND r.client_id = $7 AND r.rotated_to IS NULL AND r.revoked_at IS NULL
         AND r.expires_at > now() ${userExists}
         AND ($6::text IS NULL OR string_to_array($6::text, ' ') <@ string_to_array(r.scope, ' '))
   RETURNING r.id, r.family_id, r.user_id, r.subject, ${currentEmail} AS email, r.client_id, r.scope,
             r.auth_time, r.email_verified
    ), ins AS (${successorInsert({ id: '$2', hash: '$3', rotatedFrom: 'id' })}), audit AS (${auditInsert('old', { jti: '$4', iat: IAT_SQL, grantType: '$5', scope: '$6' })})`;
  const rotated = `family_id, user_id, subject, email, client_id, scope, auth_time, email_verified, ${IAT_SQL} AS iat,
           (SELECT dpop_jkt FROM fam) AS dpop_jkt FROM old`;
  const fastRotate = `${rotateCtes}
    SELECT ${rotated}`;
  const fastRotateWithEnt = `${rotateCtes}, ent AS (
      SELECT g.entity, g.permission FROM platform.entity_grants g, old WHERE g.email = old.email
       ORDER BY g.id FOR SHARE OF g
    )
    SELECT (SELECT json_agg(json_build_array(entity, permission)) FROM ent) AS ent_rows, ${rotated}`;
  // The same rotation for several tokens in one statement (rotateBatch): the calls made during one turn of the
  // event loop, the i-th in the arrays' i-th elements ($1 hashes … $8 keys, as above). Each row is rotated under
  // the same conditions as one alone, by the version its own hash found; a token that fails them (or that the
  // batch names twice: its row is updated once) returns no row and takes the slow path on its own. The families
  // are locked in id order, the order revokeFamilies takes them in: locked in the requests' order, the batch could
  // hold a later family while waiting for an earlier one a revocation holds, the revocation waiting for the later
  // one, and Postgres would abort one of the two (a deadlock; test/idp/rotation-batch.test.ts forces it).
  const batchCtes = `
    WITH req AS (
      SELECT * FROM unnest($1::text[], $2::uuid[], $3::text[], $4::uuid[], $5::text[], $6::text[], $7::text[], $8::text[])
               WITH ORDINALITY AS q(hash, new_id, new_hash, jti, grant_type, asked_scope, client_id, jkt, n)
    ), tok AS (
      SELECT q.n, t.ctid, t.family_id FROM req q, LATERAL (
        SELECT t.ctid, t.family_id FROM platform.refresh_tokens t WHERE t.token_hash = q.hash OFFSET 0) t
    ), locked AS MATERIALIZED (
      SELECT ${familyColumns}
        FROM platform.refresh_families f WHERE f.id = ANY (ARRAY(SELECT family_id FROM tok))
       ORDER BY f.id FOR SHARE OF f
    ), fam AS (
      SELECT tok.n, locked.* FROM tok JOIN locked ON locked.id = tok.family_id
    ), old AS (
      UPDATE platform.refresh_tokens r
         SET rotated_to = q.new_id, rotated_at = now(), rotations = 1
        FROM req q, fam
       WHERE r.ctid = ANY (ARRAY(SELECT ctid FROM tok)) AND r.token_hash = q.hash AND fam.n = q.n
         AND r.family_id = fam.id AND NOT fam.family_revoked AND NOT fam.blocked
         AND (fam.dpop_jkt IS NULL OR fam.dpop_jkt = q.jkt)
         AND r.client_id = q.client_id AND r.rotated_to IS NULL AND r.revoked_at IS NULL
         AND r.expires_at > now() ${userExists}
         AND (q.asked_scope IS NULL OR string_to_array(q.asked_scope, ' ') <@ string_to_array(r.scope, ' '))
   RETURNING q.n, q.new_id, q.new_hash, q.jti, q.grant_type, q.asked_scope, fam.dpop_jkt, r.id, r.family_id,
             r.user_id, r.subject, ${currentEmail} AS email, r.client_id, r.scope, r.auth_time, r.email_verified
    ), ins AS (${successorInsert({ id: 'new_id', hash: 'new_hash', rotatedFrom: 'id' })}), audit AS (${auditInsert('old', { jti: 'jti', iat: IAT_SQL, grantType: 'grant_type', scope: 'asked_scope' })})`;
  const batchRotated = `n, family_id, user_id, subject, email, client_id, scope, auth_time, email_verified,
           ${IAT_SQL} AS iat, dpop_jkt FROM old`;
  const batchRotate = `${batchCtes}
    SELECT ${batchRotated}`;
  const batchRotateWithEnt = `${batchCtes}, ent AS (
      SELECT old.n, g.entity, g.permission FROM platform.entity_grants g JOIN old ON g.email = old.email
       ORDER BY g.id FOR SHARE OF g
    )
    SELECT (SELECT json_agg(json_build_array(e.entity, e.permission)) FROM ent e WHERE e.n = old.n) AS ent_rows,
           ${batchRotated}`;

  return {
    userExists,
    currentEmail,
    auditInsert,
    successorInsert,
    familyLocked,
    /** One token, $1…$8 (see above): the grant, or none (the slow path decides). */
    fastRotate,
    /** The same, with the user's entity-grant rows (`ent_rows`). */
    fastRotateWithEnt,
    /** Several tokens, $1…$8 as arrays: a row per token rotated, `n` its 1-based place. */
    batchRotate,
    batchRotateWithEnt,
  };
}
