import type { ToolService } from '../kit/service.ts';
import { whoami } from './tools/whoami.ts';

export const platformService: ToolService = {
  name: 'platform',
  version: '1.0.0',
  instructions: 'Platform identity: `whoami` tells which account this connector acts as.',
  tables: [],
  async start() {
    return { tools: [whoami] };
  },
};
