// The benchmark's per-tool policy: 50 rules shaped like a real file, arranged so that the benchmark's request
// (tools/call propose_deal_closure by bench-<i>@example.com with scope mcp:<service>) is decided by the very
// last rule after walking every rule that could apply to it: its caller checks (email sets, domains, issuer,
// scopes) all run and fail first. A friendlier order would cost less.
export function benchPolicy(service: string, users: number): string {
  const rules: string[] = [];
  // 20 rules on other tools: resolved away when the file is loaded (never walked for this request).
  for (let i = 0; i < 20; i++) {
    rules.push(
      `  - service: ${service}\n    tool: other_tool_${i}\n    email: [bench-${i % users}@example.com]\n    effect: deny`,
    );
  }
  // 15 rules on this very tool, for other people: each an email-set check that fails.
  for (let i = 0; i < 15; i++) {
    rules.push(
      `  - tool: propose_deal_closure\n    email: [intern-${i}@example.com, contractor-${i}@example.com]\n    effect: deny`,
    );
  }
  // 10 rules on the issuer: each an issuer check that fails (platform tokens here).
  for (let i = 0; i < 10; i++) {
    rules.push(
      `  - service: ${service}\n    issuer: [entra, service]\n    scope: [scope-${i}]\n    effect: deny`,
    );
  }
  // 4 step-up rules for partner domains: each a domain check that fails.
  for (let i = 0; i < 4; i++) {
    rules.push(
      `  - tool: propose_deal_closure\n    email: '*@partner-${i}.example'\n    effect: require_scope\n    required_scope: mcp:${service}:write`,
    );
  }
  rules.push(`  - scope: mcp:${service}\n    effect: allow`);
  return `rules:\n${rules.join('\n')}\n`;
}
