/**
 * One request to the IdP's admin API (`/admin/api/…`) with a `platform:admin` access token: its status and JSON
 * answer. `body`, when given, is sent as JSON.
 */
export async function callAdminApi(
  issuer: string,
  token: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(`${issuer}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}
