import type { Pool } from '../../lib/db.ts';

/**
 * The resource an authorization request (or a device authorization request) named, by the refresh-token family its code starts (platform.granted_resources;
 * docs/idp.md § Resource indicators). Targets are endpoints/resource.ts's (`platform`, `service:<name>`).
 */
export interface GrantedResources {
  /** Recorded before the code exists: a code is never seen without its resource. */
  record(familyId: string, target: string): Promise<void>;
  /** The target the code (by its hash) was granted for, when it was issued to this client and named one. */
  ofCode(codeHash: string, clientId: string): Promise<string | undefined>;
  /** The target the device code (by its hash) was granted for, when it was issued to this client and named one. */
  ofDeviceCode(deviceCodeHash: string, clientId: string): Promise<string | undefined>;
  /** The target the refresh token's family (by the token's hash) was granted for, when it is this client's. */
  ofRefreshToken(tokenHash: string, clientId: string): Promise<string | undefined>;
}

export function grantedResources(pool: Pool): GrantedResources {
  const one = async (text: string, name: string, values: string[]) => {
    const { rows } = await pool.query<{ target: string }>({ name, text, values });
    return rows[0]?.target;
  };
  return {
    async record(familyId, target) {
      await pool.query({
        name: 'granted_resource_record',
        text: 'INSERT INTO platform.granted_resources (family_id, target) VALUES ($1, $2) ON CONFLICT DO NOTHING',
        values: [familyId, target],
      });
    },
    ofCode: (codeHash, clientId) =>
      one(
        `SELECT g.target FROM platform.oauth_codes c JOIN platform.granted_resources g ON g.family_id = c.family_id
          WHERE c.code = $1 AND c.client_id = $2`,
        'granted_resource_of_code',
        [codeHash, clientId],
      ),
    ofDeviceCode: (deviceCodeHash, clientId) =>
      one(
        `SELECT g.target FROM platform.device_codes d JOIN platform.granted_resources g ON g.family_id = d.family_id
          WHERE d.device_code_hash = $1 AND d.client_id = $2`,
        'granted_resource_of_device_code',
        [deviceCodeHash, clientId],
      ),
    ofRefreshToken: (tokenHash, clientId) =>
      one(
        `SELECT g.target FROM platform.refresh_tokens t JOIN platform.granted_resources g ON g.family_id = t.family_id
          WHERE t.token_hash = $1 AND t.client_id = $2`,
        'granted_resource_of_refresh_token',
        [tokenHash, clientId],
      ),
  };
}
