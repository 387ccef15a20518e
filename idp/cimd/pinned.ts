import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { type MetadataClient, parseClientIdUrl, validateMetadata } from './metadata.ts';

/**
 * PLATFORM_CIMD_PINNED_DIR: Client ID Metadata Documents an operator keeps for clients whose hosts refuse
 * server-side fetches (Claude's documents answer 403 to data-centre addresses). Every `*.json` file in the
 * folder is one document; the URL it stands for is its own `client_id` member (the file name does not
 * matter). Each is validated as a fetched document would be, at start-up: a file that is not valid throws
 * one line naming it. A client_id pinned here is served from the file and never fetched.
 */
export function loadPinnedDocuments(dir: string): Map<string, MetadataClient> {
  const pinned = new Map<string, MetadataClient>();
  let files: string[];
  try {
    files = readdirSync(dir).filter((f) => f.endsWith('.json'));
  } catch (err) {
    throw new Error(`cannot be read: ${(err as Error).message}`);
  }
  for (const file of files.sort()) {
    const path = join(dir, file);
    try {
      const doc = JSON.parse(readFileSync(path, 'utf8')) as { client_id?: unknown };
      if (typeof doc?.client_id !== 'string') throw new Error('has no client_id');
      const client = validateMetadata(parseClientIdUrl(doc.client_id), doc);
      if (pinned.has(client.clientId)) throw new Error(`pins ${client.clientId} a second time`);
      pinned.set(client.clientId, client);
    } catch (err) {
      throw new Error(`${path}: ${(err as Error).message}`);
    }
  }
  return pinned;
}
