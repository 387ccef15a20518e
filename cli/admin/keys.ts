import type { Command } from 'commander';
import type { RotationOutcome } from '../../idp/keys/ring.ts';
import type { AdminCommandKit } from './api.ts';
import { table } from './format.ts';

interface Flags {
  json?: boolean;
  emergency?: boolean;
}

/** `keys` lists the IdP's signing keys; `keys rotate [--emergency]` starts a rotation (docs/admin.md § Signing keys). */
export function registerKeyCommands({ command, act, io }: AdminCommandKit<Flags>): void {
  const keys = command('keys', "the IdP's signing keys: which one signs, which are published, and since when")
    .option('--json', 'print the API answer as JSON')
    .action(
      act(async (api, flags) => {
        const r = await api.json<{ rotation: string; items: object[] }>('GET', 'keys');
        if (flags.json) return io.out(JSON.stringify(r.items, null, 2));
        io.out(
          table(
            [
              ['kid', 'kid'],
              ['state', 'state'],
              ['origin', 'origin'],
              ['published since', 'published_since'],
              ['activated', 'activated_at'],
              ['retired', 'retired_at'],
              ['unpublished at', 'unpublish_at'],
              ['withdrawn', 'withdrawn_at'],
            ],
            r.items,
          ),
        );
      }),
    );
  keys
    .command('rotate')
    .description(
      'planned: publish a next key now, signing after PLATFORM_KEY_PUBLISH_AHEAD; --emergency: a new key signs at once and every other key is withdrawn',
    )
    .option('--emergency', 'switch now and withdraw the old keys: tokens they signed are refused everywhere')
    .option('--json', 'print the API answer as JSON')
    // --issuer and --token are the `keys` command's: read with the subcommand's own options.
    .action((_flags: Flags, cmd: Command) => rotate(cmd.optsWithGlobals<Flags>()));
  const rotate = act(async (api, flags) => {
    const r = await api.json<RotationOutcome>('POST', 'keys/rotate', {
      body: { emergency: Boolean(flags.emergency) },
    });
    if (flags.json) return io.out(JSON.stringify(r, null, 2));
    if (r.emergency)
      return io.out(
        `key ${r.kid} signs now; withdrawn: ${r.withdrawn.join(', ') || 'none'} (their tokens are refused; clients refresh)`,
      );
    io.out(
      r.created
        ? `key ${r.kid} published; it signs from ${r.activate_at}`
        : `key ${r.kid} is already published as the next key; it signs from ${r.activate_at}`,
    );
  });
}
