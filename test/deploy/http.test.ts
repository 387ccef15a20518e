// The doctor's HTTP probe on its own: a foreign Host header must not change the TLS server name (or the Host
// guard check would fail in the handshake instead of reaching the guard), endless bodies are cut, and a
// stalled server is a TIMEOUT ProbeError.
import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { TLSSocket } from 'node:tls';
import { afterEach, describe, expect, it } from 'vitest';
import { createProber, ProbeError } from '../../deploy/doctor/http.ts';

// A self-signed P-256 certificate for localhost, valid until 2126: test material only.
const KEY = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgOtDlMhjmTPwkYUr2
rvNpXc2m3zT77+k+Gjv2Jrq7nKKhRANCAAQkOzEOs/UxpjABuBSGnz8glibEqZSY
0Oul6CWT7DSytxcL1uCKF1lEsEhlG2Jw4AbTfLo2TK8SU0L/4fFZVZo0
-----END PRIVATE KEY-----`;
const CERT = `-----BEGIN CERTIFICATE-----
MIIBlTCCATugAwIBAgIUJdCAkEZLYl5uhkgHlGzwDwEB1IUwCgYIKoZIzj0EAwIw
FDESMBAGA1UEAwwJbG9jYWxob3N0MCAXDTI2MTEyMTIyMjgwMloYDzIxMjYxMDI4
MjIyODAyWjAUMRIwEAYDVQQDDAlsb2NhbGhvc3QwWTATBgcqhkjOPQIBBggqhkjO
PQMBBwNCAAQkOzEOs/UxpjABuBSGnz8glibEqZSY0Oul6CWT7DSytxcL1uCKF1lE
sEhlG2Jw4AbTfLo2TK8SU0L/4fFZVZo0o2kwZzAdBgNVHQ4EFgQUjT8Qjw6drUrB
/TEKBfmulL2C4vkwHwYDVR0jBBgwFoAUjT8Qjw6drUrB/TEKBfmulL2C4vkwDwYD
VR0TAQH/BAUwAwEB/zAUBgNVHREEDTALgglsb2NhbGhvc3QwCgYIKoZIzj0EAwID
SAAwRQIgR9xj2p/qtURind+coXUG6mRZo6P+3UUgwGiLivlvHl8CIQDJd5d6KUpu
tgubFCcbzntA4GCuBA7qzAZKcbzwAh4lVA==
-----END CERTIFICATE-----`;

const servers: Server[] = [];
async function listen(server: Server): Promise<number> {
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as { port: number }).port;
}

afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

describe('the doctor probe', () => {
  it('keeps the URL host in TLS SNI when it sends a foreign Host header', async () => {
    const port = await listen(
      createHttpsServer({ key: KEY, cert: CERT }, (req, res) => {
        res.end(JSON.stringify({ sni: (req.socket as TLSSocket).servername, host: req.headers.host }));
      }),
    );
    const prober = createProber({ timeoutMs: 3000, ca: CERT });
    try {
      const foreign = await prober.probe(`https://localhost:${port}/x`, {
        headers: { host: 'elsewhere.invalid' },
      });
      expect(foreign.json).toEqual({ sni: 'localhost', host: 'elsewhere.invalid' });
      const plain = await prober.probe(`https://localhost:${port}/x`);
      expect(plain.json).toEqual({ sni: 'localhost', host: `localhost:${port}` });
    } finally {
      await prober.close();
    }
  });

  it('cuts an endless body and does not follow redirects', async () => {
    const port = await listen(
      createHttpServer((req, res) => {
        if (req.url === '/redirect') return void res.writeHead(302, { location: '/elsewhere' }).end();
        res.writeHead(200);
        const chunk = Buffer.alloc(64 * 1024, 'a');
        const pump = () => {
          while (res.write(chunk)) {}
        };
        res.on('drain', pump);
        pump();
      }),
    );
    const prober = createProber({ timeoutMs: 3000 });
    try {
      const big = await prober.probe(`http://127.0.0.1:${port}/stream`);
      expect(big.status).toBe(200);
      expect(big.text.length).toBeLessThanOrEqual(256 * 1024);
      const redirect = await prober.probe(`http://127.0.0.1:${port}/redirect`);
      expect(redirect.status).toBe(302);
      expect(redirect.headers.get('location')).toBe('/elsewhere');
    } finally {
      await prober.close();
    }
  });

  it('reports a server that sends headers and then stalls as TIMEOUT', async () => {
    const port = await listen(
      createHttpServer((_req, res) => {
        res.writeHead(200);
        res.write('partial');
      }),
    );
    const prober = createProber({ timeoutMs: 500 });
    try {
      const err = await prober.probe(`http://127.0.0.1:${port}/`).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ProbeError);
      expect((err as ProbeError).code).toBe('TIMEOUT');
    } finally {
      await prober.close();
    }
  });
});
