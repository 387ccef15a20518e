// make images (node deploy/images/main.ts [--tag platform-identity:latest] [--ca-file PEM] [--env-file deploy/.env]):
// builds every image the deployment needs on a host without a registry (docs/deploy.md § Offline hosts) — the
// base images of deploy/images/build.ts, then the project image from deploy/Dockerfile FROM the Node one — and
// sets the lines naming them in deploy/.env (replacing those lines, adding the missing ones), or prints them
// when there is no .env yet. Needs root (debootstrap), debootstrap and a Docker Engine; reaches only Debian's
// mirror and the npm registry.

import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { processEnv } from '../../cli/config.ts';
import { release } from '../../lib/version.ts';
import { buildBaseImages, buildEnv, envLines, REPO_DIR, run, timed } from './build.ts';

try {
  const { values } = parseArgs({
    options: {
      tag: { type: 'string', default: 'platform-identity:latest' },
      'ca-file': { type: 'string' },
      // Debian's docker CLI (docker.io) when there: its BuildKit needs no buildx plugin.
      docker: {
        type: 'string',
        default: processEnv().DOCKER ?? (existsSync('/usr/bin/docker') ? '/usr/bin/docker' : 'docker'),
      },
      'env-file': { type: 'string', default: `${REPO_DIR}deploy/.env` },
      // The container suite's images are platform-test/…: the same recipe, so the same images.
      prefix: { type: 'string', default: 'platform-base' },
    },
    strict: true,
  });
  const caFile =
    values['ca-file'] ??
    (existsSync('/etc/ssl/certs/ca-certificates.crt') ? '/etc/ssl/certs/ca-certificates.crt' : undefined);
  const report = await buildBaseImages({ docker: values.docker, caFile, prefix: values.prefix });
  await timed(report.seconds, 'platform', () =>
    run(
      values.docker,
      [
        'build',
        '-q',
        '-f',
        'deploy/Dockerfile',
        '--build-arg',
        `NODE_IMAGE=${report.images.node}`,
        // The release labels (OCI), as `make image` sets them.
        ...releaseArgs(),
        '-t',
        values.tag,
        REPO_DIR,
      ],
      { env: buildEnv(), timeoutMs: 900_000 },
    ),
  );
  const lines = envLines(report.images, values.tag);
  const took = Object.entries(report.seconds)
    .map(([k, v]) => `${k} ${v}`)
    .join(', ');
  const envFile = values['env-file'];
  if (existsSync(envFile)) {
    writeFileSync(envFile, withLines(readFileSync(envFile, 'utf8'), lines));
    process.stderr.write(`images built (seconds: ${took}); ${envFile} names them:\n${lines}\n`);
  } else {
    process.stderr.write(`images built (seconds: ${took}); no ${envFile} yet: add these lines to it\n`);
    process.stdout.write(`${lines}\n`);
  }
} catch (err) {
  process.stderr.write(`make images: ${(err as Error).message}\n`);
  process.exit(err instanceof TypeError ? 2 : 1);
}

/** The .env text with each `KEY=` of `lines` replaced where it is set, and appended where it is not. */
function withLines(text: string, lines: string): string {
  let out = text.endsWith('\n') || text === '' ? text : `${text}\n`;
  for (const line of lines.split('\n')) {
    const key = line.slice(0, line.indexOf('='));
    const re = new RegExp(`^${key}=.*$`, 'm');
    out = re.test(out) ? out.replace(re, line) : `${out}${line}\n`;
  }
  return out;
}

/** deploy/Dockerfile's VERSION, REVISION and SOURCE (its OCI labels) for this checkout. */
function releaseArgs(): string[] {
  const { version, commit } = release();
  const origin = spawnSync('git', ['-C', REPO_DIR, 'config', '--get', 'remote.origin.url'], {
    encoding: 'utf8',
  });
  const source = origin.status === 0 && origin.stdout.trim() !== '' ? origin.stdout.trim() : 'unknown';
  return [
    '--build-arg',
    `VERSION=${version}`,
    '--build-arg',
    `REVISION=${commit}`,
    '--build-arg',
    `SOURCE=${source}`,
  ];
}
