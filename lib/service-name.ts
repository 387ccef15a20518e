// A service name becomes a path segment (`/<service>/mcp`), a scope (`mcp:<service>`), an environment prefix
// (`<SERVICE>_MCP_UPSTREAM`) and part of the identity key's derivation, so it is kept to this.
export const SERVICE_NAME = /^[a-z][a-z0-9-]{0,31}$/;

export function isServiceName(name: string): boolean {
  return SERVICE_NAME.test(name);
}
