// The permissions an entity grant gives: a module of its own, so the refresh-token store can name them without
// importing the entity grants (which import the revocation service, which imports the store).
export const ENTITY_PERMISSIONS = ['read', 'write'] as const;
export type EntityPermission = (typeof ENTITY_PERMISSIONS)[number];
