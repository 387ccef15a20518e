// A stand-in for the Azure CLI, for the register.sh / verify.sh tests: answers the commands those scripts run
// from a state directory (FAKE_AZ_STATE), as the real `az` would print them with the scripts' --query/-o, and
// records every call. FAKE_AZ_MIXED=1 makes `credential reset` print its warning on stdout as well, the way
// a captured `2>&1` would mix it into the secret.
import { appendFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const TENANT = '11111111-2222-3333-4444-555555555555';
export const APP_ID = 'aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee';
export const OBJECT_ID = '99999999-8888-7777-6666-555555555555';
export const SP_ID = '12121212-3434-5656-7878-909090909090';
export const USER_READ_ID = 'e1fe6dd8-ba31-4d61-89e7-88639da4683d';
export const SECRET = 'Qx8~fake.client-secret_0123456789abcdefXY';
const WARNING =
  'WARNING: The output includes credentials that you must protect. Be sure that you do not include these ' +
  'credentials in your code or check the credentials into your source control. For more information, see ' +
  'https://aka.ms/azadsp-cli';

const state = process.env.FAKE_AZ_STATE;
if (state !== undefined && process.argv[1]?.endsWith('fake-az.ts')) main(process.argv.slice(2));

function main(args: string[]): void {
  appendFileSync(join(state!, 'calls.log'), `${JSON.stringify(args)}\n`);
  const words: string[] = [];
  for (const a of args) {
    if (a.startsWith('-')) break;
    words.push(a);
  }
  const value = (flag: string): string => args[args.indexOf(flag) + 1] ?? '';
  const file = (name: string): string => join(state!, name);
  const json = <T>(name: string, fallback: T): T =>
    existsSync(file(name)) ? (JSON.parse(readFileSync(file(name), 'utf8')) as T) : fallback;
  const out = (s: string): void => {
    process.stdout.write(`${s}\n`);
  };
  switch (words.join(' ')) {
    case 'account show':
      return out(TENANT);
    case 'ad app list':
      return out(existsSync(file('app.json')) ? APP_ID : '');
    case 'ad sp show':
      return out(USER_READ_ID);
    case 'rest': {
      const body = JSON.parse(readFileSync(value('--body').slice(1), 'utf8')) as object;
      if (value('--method') === 'POST') {
        writeFileSync(
          file('app.json'),
          JSON.stringify({ ...body, id: OBJECT_ID, appId: APP_ID, passwordCredentials: [] }),
        );
        return out(`${OBJECT_ID}\t${APP_ID}`);
      }
      writeFileSync(file('app.json'), JSON.stringify({ ...json<object>('app.json', {}), ...body }));
      return;
    }
    case 'ad sp create':
      writeFileSync(file('sp'), SP_ID);
      return out(SP_ID);
    case 'ad app credential reset': {
      const app = json<{ passwordCredentials: object[] }>('app.json', { passwordCredentials: [] });
      const start = new Date();
      const end = new Date(start);
      end.setFullYear(end.getFullYear() + Number(value('--years')));
      app.passwordCredentials.push({ startDateTime: start.toISOString(), endDateTime: end.toISOString() });
      writeFileSync(file('app.json'), JSON.stringify(app));
      process.stderr.write(`${WARNING}\n`);
      if (process.env.FAKE_AZ_MIXED === '1') out(WARNING);
      return out(SECRET);
    }
    case 'keyvault secret set':
      writeFileSync(file(`vault-${value('--name')}`), readFileSync(value('--file')));
      return out('https://vault.example/secrets/x');
    case 'keyvault secret show':
      return out(readFileSync(file(`vault-${value('--name')}`), 'utf8'));
    case 'ad app permission admin-consent': {
      // The first attempt fails as it does while a new service principal replicates.
      const attempts = json<number>('consent-attempts.json', 0) + 1;
      writeFileSync(file('consent-attempts.json'), JSON.stringify(attempts));
      if (attempts === 1) {
        process.stderr.write('ERROR: service principal not found\n');
        process.exit(1);
      }
      writeFileSync(
        file('grants.json'),
        JSON.stringify([
          { consentType: 'AllPrincipals', scope: 'User.Read', resourceDisplayName: 'Microsoft Graph' },
          {
            consentType: 'AllPrincipals',
            scope: 'mcp.access',
            resourceDisplayName: 'platform MCP connector',
          },
        ]),
      );
      return;
    }
    case 'ad app show':
      return out(JSON.stringify(json('app.json', {})));
    case 'ad sp list':
      return out(existsSync(file('sp')) ? SP_ID : '');
    case 'ad app permission list-grants':
      return out(JSON.stringify(json('grants.json', [])));
    default:
      process.stderr.write(`fake az: unexpected command: ${args.join(' ')}\n`);
      process.exit(3);
  }
}
