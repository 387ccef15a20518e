import { existsSync } from 'node:fs';
import type { ComposeTarget } from '../compose.ts';
import {
  concreteNames,
  containersOf,
  documentedVariables,
  PROVISIONS,
  type Process,
  REFERENCE_URL,
  readReference,
} from '../documented-variables.ts';
import { type CheckRow, fail, pass, skip } from '../result.ts';
import { guarded } from './target.ts';

// A documented setting that deploy/.env sets and a running container lacks: the container was created before
// the line was added (compose recreates it on `up -d`), or compose.yaml does not pass it (a custom file). Names
// only, never values: a value may be a secret.

/** One row per server service: the variables .env sets for its process that its running containers lack. */
export async function checkSettingsReach(t: ComposeTarget): Promise<CheckRow[]> {
  const servers = ['idp', 'gateway', ...containersOf('tool')].filter((s) => t.services.has(s));
  const idOf = (service: string) => ({ ref: '-', subject: service, name: 'documented settings reach it' });
  if (!existsSync(REFERENCE_URL))
    return servers.map((s) =>
      skip(idOf(s), 'docs/reference.md is not here (run the doctor from a checkout)'),
    );
  const variables = documentedVariables(readReference());
  const rows: CheckRow[] = [];
  for (const service of servers) {
    const process: Process = service.startsWith('tool-') ? 'tool' : (service as Process);
    rows.push(
      await guarded(idOf(service), async () => {
        const running = (await t.containers(service)).filter((c) => c.running);
        if (running.length === 0) return skip(idOf(service), 'no running container');
        // Each container variable .env sets, and the .env name it is set under (the same, or e.g. FRONT_SUBNET).
        const expected = new Map<string, string>();
        for (const v of variables.filter((x) => x.process === process)) {
          const p =
            PROVISIONS[`compose:${v.name}`] ?? PROVISIONS[`${process}:${v.name}`] ?? PROVISIONS[v.name];
          if (p?.kind === 'set' || p?.kind === 'other') continue;
          for (const name of concreteNames(v, service)) {
            const from = p?.kind === 'from' ? p.env : name;
            if ((t.vars[from] ?? '') !== '') expected.set(name, from);
          }
        }
        const missing: string[] = [];
        for (const c of running)
          for (const [name, from] of expected)
            if (c.env.get(name) !== t.vars[from])
              missing.push(`${c.name} lacks ${name}${from === name ? '' : ` (.env's ${from})`}`);
        if (missing.length > 0)
          return fail(
            idOf(service),
            `deploy/.env sets what the container does not have: ${missing.join('; ')} (compose.yaml passes each as NAME: \${NAME:-}; \`docker compose up -d\` recreates the container)`,
          );
        return pass(idOf(service), `${expected.size} setting(s) from .env, each in every container`);
      }),
    );
  }
  return rows;
}
