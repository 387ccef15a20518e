/** `platform doctor` — not built yet. */
export async function doctor(_opts: { baseUrl: string; service?: string }): Promise<number> {
  throw new Error('platform doctor is not implemented yet');
}
