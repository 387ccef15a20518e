// The Node half of register.sh and verify.sh (which do the `az` calls): renders Graph bodies and checks
// what `az` reports. Usage:
//   node deploy/entra/cli.ts render --service S --base-url URL --callback URL1 --callback URL2
//                                   --scope-id UUID --user-read-id UUID [--display-name NAME]
//   node deploy/entra/cli.ts own-scope --app-id UUID --scope-id UUID --user-read-id UUID
//   node deploy/entra/cli.ts check --service S --base-url URL --user-read-id UUID --app FILE
//                                  --sp-exists true|false [--grants FILE] [--secret-length N] [--callback URL]...
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { formatRows, formatSummary } from '../doctor/report.ts';
import { anyFailed } from '../doctor/result.ts';
import { connectorApplication, requiredAccessWithOwnScope } from './application.ts';
import { checkRegistration } from './check-registration.ts';

const OPTIONS = {
  service: { type: 'string' },
  'base-url': { type: 'string' },
  callback: { type: 'string', multiple: true },
  'scope-id': { type: 'string' },
  'user-read-id': { type: 'string' },
  'display-name': { type: 'string' },
  'app-id': { type: 'string' },
  app: { type: 'string' },
  'sp-exists': { type: 'string' },
  grants: { type: 'string' },
  'secret-length': { type: 'string' },
} as const;

function required(values: Record<string, unknown>, name: string): string {
  const v = values[name];
  if (typeof v !== 'string' || v.trim() === '') throw new TypeError(`--${name} is required`);
  return v.trim();
}

function readJson(path: string, flag: string): unknown {
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new TypeError(`--${flag}: cannot read JSON from ${path}: ${(err as Error).message}`);
  }
}

function main(argv: string[]): number {
  const [command, ...rest] = argv;
  const { values } = parseArgs({ args: rest, options: OPTIONS, strict: true });
  const v = values as Record<string, unknown>;
  switch (command) {
    case 'render': {
      const app = connectorApplication({
        service: required(v, 'service'),
        baseUrl: required(v, 'base-url'),
        callbacks: values.callback ?? [],
        scopeId: required(v, 'scope-id'),
        userReadId: required(v, 'user-read-id'),
        ...(values['display-name'] ? { displayName: values['display-name'] } : {}),
      });
      process.stdout.write(`${JSON.stringify(app, null, 2)}\n`);
      return 0;
    }
    case 'own-scope': {
      const body = requiredAccessWithOwnScope({
        appId: required(v, 'app-id'),
        scopeId: required(v, 'scope-id'),
        userReadId: required(v, 'user-read-id'),
      });
      process.stdout.write(`${JSON.stringify(body)}\n`);
      return 0;
    }
    case 'check': {
      const secretLength = values['secret-length'];
      if (secretLength !== undefined && !/^\d+$/.test(secretLength)) {
        throw new TypeError('--secret-length must be a whole number');
      }
      const rows = checkRegistration(
        {
          app: readJson(required(v, 'app'), 'app'),
          servicePrincipalExists: required(v, 'sp-exists') === 'true',
          grants: values.grants === undefined ? undefined : readJson(values.grants, 'grants'),
          secretLength: secretLength === undefined ? undefined : Number(secretLength),
        },
        {
          service: required(v, 'service'),
          baseUrl: required(v, 'base-url'),
          userReadId: required(v, 'user-read-id'),
          ...(values.callback ? { callbacks: values.callback } : {}),
        },
      );
      process.stdout.write(`${formatRows(rows)}\n${formatSummary(rows)}\n`);
      return anyFailed(rows) ? 1 : 0;
    }
    default:
      throw new TypeError(`unknown command "${command ?? ''}": render, own-scope or check`);
  }
}

try {
  process.exitCode = main(process.argv.slice(2));
} catch (err) {
  process.stderr.write(`entra: ${(err as Error).message}\n`);
  process.exitCode = 2;
}
