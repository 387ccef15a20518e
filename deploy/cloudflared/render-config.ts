// node deploy/cloudflared/render-config.ts --host app.example.com --tunnel-id <uuid>
//   [--services platform,mail,deals] [--proxy http://proxy:81] [--web-app http://web:3000] > deploy/cloudflared/config.yml
import { parseArgs } from 'node:util';
import { renderTunnelConfig } from './tunnel-config.ts';

try {
  const { values } = parseArgs({
    options: {
      host: { type: 'string' },
      'tunnel-id': { type: 'string' },
      services: { type: 'string', default: 'platform,mail,deals' },
      proxy: { type: 'string', default: 'http://proxy:81' },
      'web-app': { type: 'string' },
    },
    strict: true,
  });
  if (values.host === undefined || values['tunnel-id'] === undefined) {
    throw new TypeError('--host and --tunnel-id are required');
  }
  process.stdout.write(
    renderTunnelConfig({
      host: values.host,
      tunnelId: values['tunnel-id'],
      services: values.services
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s !== ''),
      proxyUrl: values.proxy,
      ...(values['web-app'] === undefined ? {} : { webAppUrl: values['web-app'] }),
    }),
  );
} catch (err) {
  process.stderr.write(`render-config: ${(err as Error).message}\n`);
  process.exit(2);
}
