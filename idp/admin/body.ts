import { readJson } from '../../lib/http.ts';
import type { Exchange } from '../context.ts';
import { InvalidRequestError } from '../errors.ts';

/** A JSON object body, or 400 invalid_request. */
export async function readJsonObject(x: Exchange): Promise<Record<string, unknown>> {
  const body = await readJson(x.req, 16 * 1024);
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw new InvalidRequestError('the body must be a JSON object');
  return body as Record<string, unknown>;
}
