// The signing-key notice channel (docs/reference.md § Redis keys), shared by the IdP replicas and the gateways.
// An IdP publishes `{"issuer": "<issuer>", "withdrawn": ["<kid>", ...], "signing": "<kid>"}` after a rotation
// changed which keys are published; `withdrawn` lists keys taken out at once (an emergency rotation).
//
// A notice is never trusted with a key: it can only make a reader re-read (the IdP: its own table; a gateway:
// the issuer's key set over HTTP) and, for `withdrawn`, stop accepting a kid for a while. Whoever can publish on
// Redis can already deny tokens through the denylist; a notice gives them nothing more.

export const KEY_NOTICE_CHANNEL = 'platform:keys';

export interface KeyNotice {
  issuer: string;
  withdrawn: string[];
  /** The kid that signs after the change, when the notice says. */
  signing: string | undefined;
}

const KID = /^[\x21-\x7e]{1,200}$/;

export function encodeKeyNotice(n: KeyNotice): string {
  return JSON.stringify({
    issuer: n.issuer,
    withdrawn: n.withdrawn,
    ...(n.signing ? { signing: n.signing } : {}),
  });
}

export function parseKeyNotice(text: string): KeyNotice | undefined {
  let v: Record<string, unknown>;
  try {
    v = JSON.parse(text) as Record<string, unknown>;
  } catch {
    return undefined;
  }
  if (v === null || typeof v !== 'object' || typeof v.issuer !== 'string' || v.issuer === '')
    return undefined;
  const withdrawn = v.withdrawn ?? [];
  if (!Array.isArray(withdrawn) || withdrawn.length > 100) return undefined;
  if (!withdrawn.every((k) => typeof k === 'string' && KID.test(k))) return undefined;
  const signing = v.signing;
  if (signing !== undefined && (typeof signing !== 'string' || !KID.test(signing))) return undefined;
  return { issuer: v.issuer, withdrawn: withdrawn as string[], signing: signing as string | undefined };
}
