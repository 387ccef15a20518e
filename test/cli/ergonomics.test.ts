// What a newcomer meets first: `platform` on an old system Node, --version, usage errors (exit 2, one line),
// and a server that is not there (one line naming the URL and where it came from).
import { execFileSync, spawn } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, PLATFORM_BIN } from '../helpers/processes.ts';
import { type Finished, OLD_NODE, oldNodeVersion, runPlatform, tempConfigHome } from './support.ts';

const { version: packageVersion } = (await import('../../package.json', { with: { type: 'json' } })).default;
/** What --version prints: package.json's version and this checkout's commit (git's own answer). */
const head = execFileSync('git', ['-C', dirname(PLATFORM_BIN), 'rev-parse', 'HEAD'], {
  encoding: 'utf8',
}).trim();
const version = `${packageVersion} (commit ${head.slice(0, 12)})`;

/** Runs `<node> <script> <args>` with only PATH and HOME set, as a shell would. */
function runWith(node: string, script: string, args: string[], env: Record<string, string> = {}) {
  return new Promise<Finished>((resolve, reject) => {
    const child = spawn(node, [script, ...args], {
      env: { PATH: `${dirname(node)}:/usr/bin:/bin`, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d;
    });
    child.stderr.on('data', (d: Buffer) => {
      stderr += d;
    });
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

let scratch: string;
beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'platform-ergonomics-'));
});
afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

describe('platform on an old Node', () => {
  it(`re-runs itself with the Node that make keeps under .tools/ (system Node ${oldNodeVersion()})`, async () => {
    const r = await runWith(OLD_NODE, PLATFORM_BIN, ['--version']);
    expect(r).toEqual({ code: 0, stdout: `${version}\n`, stderr: '' });
  });

  it('does the same through a link on PATH (make install), and passes exit codes through', async () => {
    const bin = join(scratch, 'bin');
    await mkdir(bin, { recursive: true });
    await symlink(PLATFORM_BIN, join(bin, 'platform'));
    const ok = await runWith(OLD_NODE, join(bin, 'platform'), ['--version']);
    expect(ok.stdout).toBe(`${version}\n`);
    const usage = await runWith(OLD_NODE, join(bin, 'platform'), ['frobnicate']);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toBe("platform: unknown command 'frobnicate' (see `platform --help`)\n");
  });

  it('says in one line what to do when there is no Node it can use', async () => {
    // A checkout where make has not run yet: no .tools/.
    const bare = join(scratch, 'bare');
    await mkdir(join(bare, 'bin'), { recursive: true });
    await copyFile(PLATFORM_BIN, join(bare, 'bin', 'platform.js'));
    const r = await runWith(OLD_NODE, join(bare, 'bin', 'platform.js'), ['--version']);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(
      `platform: needs Node 22.12 or newer, this is Node ${oldNodeVersion()} (${OLD_NODE}); run \`make deps\` in ${bare} to fetch Node 24 into .tools/, or put Node 24 first on PATH\n`,
    );
  });
});

describe('usage errors', () => {
  const cases: Array<[string[], string]> = [
    [['frobnicate'], "platform: unknown command 'frobnicate' (see `platform --help`)"],
    [['logn'], "platform: unknown command 'logn' (Did you mean login?) (see `platform --help`)"],
    [['login', '--bogus'], "platform: unknown option '--bogus' (see `platform login --help`)"],
    [['call'], "platform: missing required argument 'service' (see `platform call --help`)"],
    [
      ['admin', 'revoke-user'],
      "platform: required option '--email <email>' not specified (see `platform admin revoke-user --help`)",
    ],
    [
      ['login', '--issuer', 'nope'],
      'platform: configuration error: --issuer: must be an absolute http(s) URL, got "nope"',
    ],
    [['login', '--scope', ' '], 'platform: configuration error: --scope: must name at least one scope'],
    [
      ['call', 'platform', 'whoami', '[1]', '--token', 't'],
      `platform: json-args must be a JSON object, e.g. '{"deal_id": "D-1"}'`,
    ],
    [
      ['admin', 'audit', '--since', 'yesterday', '--token', 't'],
      'platform: --since must be an ISO 8601 time (2026-11-23, 2026-11-23T14:00:00Z) or a span back from now (30m, 2h, 7d), got "yesterday"',
    ],
    [
      ['admin', 'audit', '--limit', '0', '--token', 't'],
      'platform: --limit must be a whole number from 1 to 1000000, got "0"',
    ],
    [
      ['admin', 'audit', '--format', 'xml', '--token', 't'],
      'platform: --format must be one of table, json, jsonl, csv, got "xml"',
    ],
  ];
  for (const [args, line] of cases) {
    it(`platform ${args.join(' ')} → exit 2, one line`, async () => {
      // The admin cases never reach a server: the options are checked first (the port is closed anyway).
      const r = await runPlatform(args, { PLATFORM_ISSUER: `http://127.0.0.1:${await freePort()}` });
      expect(r.stdout).toBe('');
      expect(r.stderr).toBe(`${line}\n`);
      expect(r.code).toBe(2);
    });
  }

  it('platform alone prints the help on stderr and exits 2; --help and --version exit 0', async () => {
    const alone = await runPlatform([], {});
    expect(alone.code).toBe(2);
    expect(alone.stderr).toMatch(/^Usage: platform \[options\] \[command\]/);
    expect(await runPlatform(['--help'], {})).toMatchObject({ code: 0, stderr: '' });
    expect(await runPlatform(['-V'], {})).toEqual({ code: 0, stdout: `${version}\n`, stderr: '' });
  });
});

describe('a server that is not there', () => {
  let home: Awaited<ReturnType<typeof tempConfigHome>>;
  let dead: string;
  beforeAll(async () => {
    home = await tempConfigHome();
    dead = `http://127.0.0.1:${await freePort()}`;
  });
  afterAll(() => home.cleanup());

  it('login names the URL and the variable it came from', async () => {
    const fromEnv = await runPlatform(['login', '--no-browser'], { HOME: home.dir, PLATFORM_ISSUER: dead });
    expect(fromEnv).toEqual({
      code: 1,
      stdout: '',
      stderr: `platform: cannot reach the IdP at ${dead} (from PLATFORM_ISSUER): connection refused (is it running?)\n`,
    });
    const fromFlag = await runPlatform(['login', '--no-browser', '--issuer', dead], { HOME: home.dir });
    expect(fromFlag.stderr).toBe(
      `platform: cannot reach the IdP at ${dead} (from --issuer): connection refused (is it running?)\n`,
    );
  });

  it('call and tools name the gateway and the variable it came from', async () => {
    for (const cmd of [
      ['call', 'platform', 'whoami'],
      ['tools', 'platform'],
    ]) {
      const r = await runPlatform([...cmd, '--token', 'x'], { HOME: home.dir, PLATFORM_GATEWAY_URL: dead });
      expect(r).toEqual({
        code: 1,
        stdout: '',
        stderr: `platform: cannot reach the gateway at ${dead}/platform/mcp (from PLATFORM_GATEWAY_URL): connection refused (is it running?)\n`,
      });
    }
  });

  it('admin names the IdP it could not reach and how to name another', async () => {
    const r = await runPlatform(['admin', 'keys', '--token', 'x'], { HOME: home.dir, PLATFORM_ISSUER: dead });
    expect(r).toEqual({
      code: 1,
      stdout: '',
      stderr: `platform: cannot reach the IdP at ${dead} (from PLATFORM_ISSUER): connection refused (is it running?)\n`,
    });
  });

  it('migrate and dev name the database they could not reach, without its password', async () => {
    const port = await freePort();
    const url = `postgresql://postgres:hunter2@127.0.0.1:${port}/platform`;
    const line = `platform: cannot reach the database at postgresql://postgres:***@127.0.0.1:${port}/platform (DATABASE_URL): connection refused (is it running?)\n`;
    expect(await runPlatform(['migrate'], { DATABASE_URL: url })).toEqual({
      code: 1,
      stdout: '',
      stderr: line,
    });
    const dev = await runPlatform(['dev'], {
      DATABASE_URL: url,
      PLATFORM_DEV_DATA_DIR: join(scratch, 'dev-data'),
      IDP_PORT: String(await freePort()),
      GATEWAY_PORT: String(await freePort()),
    });
    expect(dev.code).toBe(1);
    expect(dev.stderr).toBe(line);
  });

  it('admin without a login says to log in', async () => {
    const r = await runPlatform(['admin', 'keys'], { XDG_CONFIG_HOME: home.dir, PLATFORM_ISSUER: dead });
    expect(r).toEqual({ code: 1, stdout: '', stderr: 'platform: not logged in: run `platform login`\n' });
  });
});
