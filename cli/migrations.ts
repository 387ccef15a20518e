import { fileURLToPath } from 'node:url';
import type { MigrationSet } from '../lib/migrate.ts';

/** Every component's migrations, in the order `platform migrate` applies them. */
export const MIGRATION_SETS: readonly MigrationSet[] = [
  { component: 'idp', dir: fileURLToPath(new URL('../idp/migrations/', import.meta.url)) },
  { component: 'tools', dir: fileURLToPath(new URL('../tools/migrations/', import.meta.url)) },
];
