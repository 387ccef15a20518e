// The per-tool policy as the compose stack ships it: the example file loads under the stack's services, and the
// gateway containers get the folder and the variable.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { compilePolicy } from '../../gateway/policy/compile.ts';
import { createPolicyCheck } from '../../gateway/policy/gate.ts';
import { loadPolicyFile } from '../../gateway/policy/load.ts';

const deploy = fileURLToPath(new URL('../../deploy/', import.meta.url));
const SERVICES = ['platform', 'mail', 'deals'];

describe('deploy/policy', () => {
  it('policy.example.yaml loads with the stack’s services and decides as its comments say', async () => {
    const rules = await loadPolicyFile(join(deploy, 'policy/policy.example.yaml'), { services: SERVICES });
    const check = createPolicyCheck(compilePolicy(rules, SERVICES));
    const caller = (email: string, scope = 'mcp:mail mcp:deals') => ({
      email,
      kind: 'platform' as const,
      scopes: scope.split(' '),
    });
    const call = (tool: string) => [{ method: 'tools/call', tool }];
    expect(() => check.checkCalls('mail', call('send_mail'), caller('sam@contractor.example'))).toThrow(
      /policy rule 1 denies the tool send_mail of mail/,
    );
    expect(() => check.checkCalls('mail', call('send_mail'), caller('ana@example.com'))).not.toThrow();
    expect(() => check.checkCalls('deals', call('propose_deal_closure'), caller('ana@example.com'))).toThrow(
      /platform:admin/,
    );
  });

  it('compose mounts deploy/policy read-only into the gateways and passes GATEWAY_POLICY_FILE through', () => {
    const compose = parse(readFileSync(join(deploy, 'compose.yaml'), 'utf8'), { merge: true }) as {
      services: Record<string, { environment: Record<string, string>; volumes?: string[] }>;
    };
    const gateway = compose.services.gateway!;
    expect(gateway.volumes).toContain('./policy:/etc/platform/policy:ro');
    expect(gateway.environment.GATEWAY_POLICY_FILE).toBe(['$', '{GATEWAY_POLICY_FILE:-}'].join(''));
    expect(readFileSync(join(deploy, 'env.example'), 'utf8')).toMatch(/^GATEWAY_POLICY_FILE=$/m);
  });
});
