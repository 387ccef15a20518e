import { type CheckRow, fail, pass } from '../result.ts';
import { describeResponse, guarded, type ServiceTarget } from './target.ts';

/** #2: the liveness route answers 200 under the public host, prefix kept (the tunnel forwards it as is). */
export function checkHealth(t: ServiceTarget): Promise<CheckRow> {
  const id = { ref: '#2', subject: t.service, name: 'health route under public host' };
  const url = `${t.baseUrl}/${t.service}/health`;
  return guarded(id, async () => {
    const res = await t.probe(url);
    return res.status === 200
      ? pass(id, `200 from GET ${url}`)
      : fail(id, `GET ${url} answered ${describeResponse(res)}, expected 200`);
  });
}
