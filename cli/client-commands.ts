import type { Command } from 'commander';

/** `platform login | token | logout | call` — not built yet. */
export function registerClientCommands(_program: Command): void {}
