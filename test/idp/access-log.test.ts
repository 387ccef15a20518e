// The IdP's access line (idp/app.ts): one JSON line a request with its id, method, path (never the query),
// status and time, written without the redaction pass; every other line keeps the redaction.
import { generateKeyPairSync } from 'node:crypto';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { createIdpHandler } from '../../idp/app.ts';
import { loadIdpConfig } from '../../idp/config.ts';
import type { IdpContext } from '../../idp/context.ts';
import { createLogger } from '../../lib/logger.ts';

describe('the access line', () => {
  it('names the request without its query; other lines are still redacted', async () => {
    const lines: Record<string, unknown>[] = [];
    const log = createLogger({
      name: 'idp',
      destination: { write: (line: string) => void lines.push(JSON.parse(line)) },
    });
    const config = loadIdpConfig(
      {
        PLATFORM_OIDC_ISSUER: 'http://127.0.0.1:1',
        DATABASE_URL: 'postgresql://x@127.0.0.1/x',
        PLATFORM_AUDIENCE: 'https://platform.test/api',
        PLATFORM_OIDC_PRIVATE_KEY: generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({
          type: 'pkcs8',
          format: 'pem',
        }) as string,
      },
      { redisRequired: false },
    );
    const server = createServer(createIdpHandler({ config } as unknown as IdpContext, log));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    try {
      const { port } = server.address() as AddressInfo;
      const res = await fetch(`http://127.0.0.1:${port}/nowhere?refresh_token=secret-value`, {
        headers: { 'x-request-id': 'req-1' },
      });
      expect(res.status).toBe(404);
      await expect.poll(() => lines.find((l) => l.msg === 'request')).toBeDefined();
      const line = lines.find((l) => l.msg === 'request')!;
      expect(line).toMatchObject({
        name: 'idp',
        reqId: 'req-1',
        method: 'GET',
        path: '/nowhere',
        status: 404,
      });
      expect(typeof line.ms).toBe('number');
      expect(JSON.stringify(lines)).not.toContain('secret-value');
      // The root logger's lines keep the redaction.
      log.info({ body: { refresh_token: 'secret-value' } }, 'other');
      expect(lines.find((l) => l.msg === 'other')).toMatchObject({ body: { refresh_token: '[redacted]' } });
    } finally {
      server.close();
    }
  });
});
