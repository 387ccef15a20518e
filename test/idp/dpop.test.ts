// DPoP (RFC 9449) at the IdP, through a real `platform idp` process: discovery, every grant with a proof
// (token_type DPoP, cnf.jkt, the sign-in bound to the key), unbound refresh tokens with a proof, dpop_jkt on
// authorize, dpop_bound_access_tokens clients, userinfo with the DPoP scheme, and a bound client's two processes
// refreshing the same token at once.
import { describe, expect, it } from 'vitest';
import { dpopSignIn, dpopTokenRequest, jwtPayload, newDpopKey } from '../helpers/dpop.ts';
import { idpWithUser } from '../helpers/idp-with-user.ts';
import {
  answerDevice,
  CLI,
  DEVICE_GRANT,
  LOOPBACK,
  obtainCode,
  postForm,
  refresh,
  signIn,
  startDevice,
} from '../helpers/oauth.ts';

const f = idpWithUser({});

const refreshForm = (token: string, clientId = CLI) => ({
  grant_type: 'refresh_token',
  refresh_token: token,
  client_id: clientId,
});

describe('DPoP at the token endpoint', () => {
  it('discovery names the proof algorithms', async () => {
    const meta = (await (
      await fetch(`${f.idp.issuer}/.well-known/oauth-authorization-server`)
    ).json()) as Record<string, unknown>;
    expect(meta.dpop_signing_alg_values_supported).toEqual(expect.arrayContaining(['ES256', 'EdDSA']));
  });

  it('a code exchange with a proof gets a DPoP token bound to the key; the refresh needs the same key', async () => {
    const key = await newDpopKey();
    const t = await dpopSignIn(f.idp.issuer, f.user.sessionToken, key);
    expect(t.token_type).toBe('DPoP');
    expect(jwtPayload(t.access_token).cnf).toEqual({ jkt: key.jkt });
    const r = await dpopTokenRequest(f.idp.issuer, refreshForm(t.refresh_token), key);
    expect(r.status).toBe(200);
    expect(r.json.token_type).toBe('DPoP');
    expect(jwtPayload(r.json.access_token as string).cnf).toEqual({ jkt: key.jkt });
  });

  it('EdDSA keys work as well', async () => {
    const key = await newDpopKey('EdDSA');
    const t = await dpopSignIn(f.idp.issuer, f.user.sessionToken, key);
    expect(jwtPayload(t.access_token).cnf).toEqual({ jkt: key.jkt });
  });

  it('without a proof nothing changes: Bearer, no cnf', async () => {
    const t = await signIn(f.idp.issuer, f.user.sessionToken);
    expect((t as Record<string, unknown>).token_type).toBe('Bearer');
    expect(jwtPayload(t.access_token).cnf).toBeUndefined();
  });

  it('an unbound refresh token with a proof: a bound access token, the refresh token stays unbound', async () => {
    const key = await newDpopKey();
    const t = await signIn(f.idp.issuer, f.user.sessionToken);
    const r = await dpopTokenRequest(f.idp.issuer, refreshForm(t.refresh_token), key);
    expect(r.status).toBe(200);
    expect(r.json.token_type).toBe('DPoP');
    expect(jwtPayload(r.json.access_token as string).cnf).toEqual({ jkt: key.jkt });
    const next = await refresh(f.idp.issuer, r.json.refresh_token as string);
    expect(next.status).toBe(200);
    expect(next.json.token_type).toBe('Bearer');
  });

  it('the device_code grant with a proof binds too', async () => {
    const key = await newDpopKey();
    const d = await startDevice(f.idp.issuer);
    await answerDevice(f.idp.issuer, d, f.user.sessionToken);
    const r = await dpopTokenRequest(
      f.idp.issuer,
      { grant_type: DEVICE_GRANT, device_code: d.device_code, client_id: CLI },
      key,
    );
    expect(r.status).toBe(200);
    expect(r.json.token_type).toBe('DPoP');
    expect(jwtPayload(r.json.access_token as string).cnf).toEqual({ jkt: key.jkt });
    const stolen = await refresh(f.idp.issuer, r.json.refresh_token as string);
    expect(stolen.json.error).toBe('invalid_grant');
  });

  it('dpop_jkt on authorize binds the code: exchanged only with a proof by that key', async () => {
    const key = await newDpopKey();
    const other = await newDpopKey();
    const exchange = async (proofKey: typeof key | undefined) => {
      const c = await obtainCode({
        issuer: f.idp.issuer,
        sessionToken: f.user.sessionToken,
        params: { dpop_jkt: key.jkt },
      });
      const form = {
        grant_type: 'authorization_code',
        code: c.code,
        code_verifier: c.verifier,
        redirect_uri: c.redirectUri,
        client_id: c.clientId,
      };
      return dpopTokenRequest(f.idp.issuer, form, proofKey);
    };
    expect((await exchange(undefined)).json.error).toBe('invalid_grant');
    expect((await exchange(other)).json.error).toBe('invalid_grant');
    const ok = await exchange(key);
    expect(ok.status).toBe(200);
    expect(jwtPayload(ok.json.access_token as string).cnf).toEqual({ jkt: key.jkt });
  });

  it('a malformed dpop_jkt is refused at authorize', async () => {
    await expect(
      obtainCode({ issuer: f.idp.issuer, sessionToken: f.user.sessionToken, params: { dpop_jkt: 'short' } }),
    ).rejects.toThrow(/dpop_jkt/);
  });

  it('a client registered with dpop_bound_access_tokens must send a proof', async () => {
    const reg = await fetch(`${f.idp.issuer}/oauth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ redirect_uris: [LOOPBACK], dpop_bound_access_tokens: true }),
    });
    const client = (await reg.json()) as { client_id: string; dpop_bound_access_tokens: boolean };
    expect(client.dpop_bound_access_tokens).toBe(true);
    const c = await obtainCode({
      issuer: f.idp.issuer,
      sessionToken: f.user.sessionToken,
      params: { client_id: client.client_id, redirect_uri: LOOPBACK, state: 's' },
    });
    const form = {
      grant_type: 'authorization_code',
      code: c.code,
      code_verifier: c.verifier,
      redirect_uri: c.redirectUri,
      client_id: client.client_id,
    };
    const bare = await postForm(`${f.idp.issuer}/oauth/token`, form);
    expect(bare.status).toBe(400);
    expect(bare.json.error).toBe('invalid_dpop_proof');
    const bad = await fetch(`${f.idp.issuer}/oauth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ redirect_uris: [LOOPBACK], dpop_bound_access_tokens: 'yes' }),
    });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: string }).error).toBe('invalid_client_metadata');
  });

  it("a bound client's two processes refreshing the same token at once both keep working chains", async () => {
    const key = await newDpopKey();
    const t = await dpopSignIn(f.idp.issuer, f.user.sessionToken, key);
    const [a, b] = await Promise.all([
      dpopTokenRequest(f.idp.issuer, refreshForm(t.refresh_token), key),
      dpopTokenRequest(f.idp.issuer, refreshForm(t.refresh_token), key),
    ]);
    expect([a.status, b.status]).toEqual([200, 200]);
    for (const r of [a, b]) {
      const next = await dpopTokenRequest(f.idp.issuer, refreshForm(r.json.refresh_token as string), key);
      expect(next.status).toBe(200);
    }
  });
});

describe('userinfo with DPoP', () => {
  it('answers a bound token sent as DPoP with a proof for its URL', async () => {
    const key = await newDpopKey();
    const t = await dpopSignIn(f.idp.issuer, f.user.sessionToken, key);
    const url = `${f.idp.issuer}/oauth/userinfo`;
    const res = await fetch(url, {
      headers: {
        authorization: `DPoP ${t.access_token}`,
        dpop: await key.proof('GET', url, { accessToken: t.access_token }),
      },
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { email: string }).email).toBe(f.user.email);
  });
});
