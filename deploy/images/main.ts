// make images (node deploy/images/main.ts [--tag platform-identity:latest] [--ca-file PEM]): builds every image the
// deployment needs on a host without a registry (docs/deploy.md § Offline hosts) — the base images of
// deploy/images/build.ts, then the project image from deploy/Dockerfile FROM the Node one — and prints the
// deploy/.env lines naming them. Needs root (debootstrap), debootstrap and a Docker Engine; reaches only
// Debian's mirror and the npm registry.
import { existsSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { buildBaseImages, buildEnv, envLines, REPO_DIR, run, timed } from './build.ts';

try {
  const { values } = parseArgs({
    options: {
      tag: { type: 'string', default: 'platform-identity:latest' },
      'ca-file': { type: 'string' },
      docker: { type: 'string', default: process.env.DOCKER ?? 'docker' },
    },
    strict: true,
  });
  const caFile =
    values['ca-file'] ??
    (existsSync('/etc/ssl/certs/ca-certificates.crt') ? '/etc/ssl/certs/ca-certificates.crt' : undefined);
  const report = await buildBaseImages({ docker: values.docker, caFile });
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
        '-t',
        values.tag,
        REPO_DIR,
      ],
      { env: buildEnv(), timeoutMs: 900_000 },
    ),
  );
  process.stderr.write(
    `images built (seconds: ${Object.entries(report.seconds)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}); add to deploy/.env:\n`,
  );
  process.stdout.write(`${envLines(report.images, values.tag)}\n`);
} catch (err) {
  process.stderr.write(`make images: ${(err as Error).message}\n`);
  process.exit(err instanceof TypeError ? 2 : 1);
}
