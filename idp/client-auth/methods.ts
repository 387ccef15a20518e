// RFC 7591 token_endpoint_auth_method values this provider registers and accepts: a module of its own, so the
// client store can name them without importing client authentication (which reads the context, and so the store).
export const AUTH_METHODS = ['none', 'client_secret_post', 'client_secret_basic', 'private_key_jwt'] as const;
export type AuthMethod = (typeof AUTH_METHODS)[number];
export const isAuthMethod = (v: unknown): v is AuthMethod => AUTH_METHODS.includes(v as AuthMethod);
