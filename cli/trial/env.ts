import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { exportJWK, generateKeyPair } from 'jose';
import { ConfigError } from '../../lib/config.ts';
import { deriveIdentityKey } from '../../lib/identity.ts';
import { TOOL_SERVICES } from '../../tools/config.ts';
import { TRIAL_USER_EMAIL } from './config.ts';

export interface TrialEnvOptions {
  /** The proxy's port on 127.0.0.1; the issuer and every public URL are http://localhost:<port>. */
  port: number;
  /** FRONT_SUBNET: a /24 no other network of the host uses (docs/deploy.md § Networks). */
  frontSubnet: string;
  project: string;
}

export function trialEnvOptions(flags: {
  port?: string;
  frontSubnet?: string;
  project?: string;
}): TrialEnvOptions {
  const port = Number(flags.port ?? '8080');
  if (!Number.isInteger(port) || port < 1 || port > 65535)
    throw new ConfigError('--port', `must be a port number, got "${flags.port}"`);
  const frontSubnet = flags.frontSubnet ?? '172.16.240.0/24';
  if (!/^\d{1,3}(\.\d{1,3}){3}\/\d{1,2}$/.test(frontSubnet))
    throw new ConfigError(
      '--front-subnet',
      `must be an IPv4 CIDR such as 172.16.240.0/24, got "${frontSubnet}"`,
    );
  const project = flags.project ?? 'platform-trial';
  if (!/^[a-z0-9][a-z0-9_-]*$/.test(project))
    throw new ConfigError(
      '--project',
      `must be a compose project name ([a-z0-9][a-z0-9_-]*), got "${project}"`,
    );
  return { port, frontSubnet, project };
}

/**
 * `platform trial-env`: a complete deploy/.env for a trial on this machine, every secret freshly generated
 * (none of env.example's, which every server refuses). The trial: the bundled Postgres with the web
 * application's tables and the development sign-in page (profile `trial`), no tunnel, everything on
 * http://localhost:<port>. Not for production: the sign-in lets anyone in as anyone.
 */
export async function trialEnv(o: TrialEnvOptions): Promise<string> {
  const hex = () => randomBytes(32).toString('hex');
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const jwk = {
    ...(await exportJWK(privateKey)),
    kid: `trial-${randomBytes(4).toString('hex')}`,
    alg: 'RS256',
    use: 'sig',
  };
  const identitySecret = randomBytes(48).toString('base64url');
  const origin = `http://localhost:${o.port}`;
  const lines = [
    '# A TRIAL deployment on this machine, written by `platform trial-env`: NOT FOR PRODUCTION. The sign-in',
    '# page (profile `trial`) lets anyone sign in as anyone without a password, and refuses to run for an issuer',
    '# other than http://localhost. For a real deployment start again from env.example.',
    `COMPOSE_PROJECT_NAME=${o.project}`,
    'COMPOSE_FILE=compose.yaml:compose.postgres.yaml',
    'COMPOSE_PROFILES=trial',
    "# The proxy sends /api/auth/* (the web application's sign-in, which the IdP redirects to) to the trial sign-in.",
    'TRIAL_SIGN_IN_UPSTREAM=signin:3000',
    `PROXY_HOST_PORT=${o.port}`,
    `FRONT_SUBNET=${o.frontSubnet}`,
    `PUBLIC_BASE_URL=${origin}`,
    `PLATFORM_OIDC_ISSUER=${origin}`,
    `PLATFORM_AUDIENCE=${origin}`,
    `PLATFORM_ADMIN_EMAILS=${TRIAL_USER_EMAIL}`,
    'DATABASE_ADDRESS=postgres:5432/platform',
    `POSTGRES_PASSWORD=${hex()}`,
    `PLATFORM_MIGRATE_DB_PASSWORD=${hex()}`,
    `PLATFORM_IDP_DB_PASSWORD=${hex()}`,
    `PLATFORM_TOOLS_DB_PASSWORD=${hex()}`,
    `REDIS_ADMIN_PASSWORD=${hex()}`,
    `REDIS_IDP_PASSWORD=${hex()}`,
    `REDIS_GATEWAY_PASSWORD=${hex()}`,
    `PLATFORM_OIDC_PRIVATE_KEY=${JSON.stringify(jwk)}`,
    `GATEWAY_IDENTITY_SECRET=${identitySecret}`,
    ...TOOL_SERVICES.map(
      (s) => `${s.toUpperCase()}_TOOL_IDENTITY_KEY=${deriveIdentityKey(identitySecret, s)}`,
    ),
  ];
  return `${lines.join('\n')}\n`;
}

/**
 * The trial's proxy publishes 127.0.0.1:<port>, which `make dev`'s gateway holds by default (8080): compose would
 * then fail to start the proxy only after building and starting everything else. Said when the .env is written,
 * with what to do (the .env is printed all the same: the port may be freed before `up`).
 */
export async function portInUseNote(port: number): Promise<string | undefined> {
  const free = await new Promise<boolean>((resolve) => {
    const probe = createServer();
    probe.once('error', () => resolve(false));
    probe.listen(port, '127.0.0.1', () => probe.close(() => resolve(true)));
  });
  if (free) return undefined;
  const other = port === 8090 ? 8091 : 8090;
  return (
    `platform: port ${port} on 127.0.0.1 is in use now (\`make dev\`'s gateway listens on 8080): stop it before ` +
    `\`docker compose up\`, or write the .env with \`trial-env --port ${other}\` and use http://localhost:${other} in ` +
    'the commands that follow'
  );
}
