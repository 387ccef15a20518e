#!/usr/bin/env node
// The `platform` command. The sources are TypeScript run by Node's type stripping (no build step), which needs
// Node 22.12 or newer. This file is plain JavaScript that any Node can parse, so that on an older Node (a
// system Node 20, say) it can hand over to a Node that works instead of failing on an unknown option:
//   - Node with type stripping on by default (>= 22.18 / 23.6): runs the CLI in this process;
//   - Node 22.12–22.17: runs itself again with --experimental-strip-types;
//   - older: runs itself again with the Node 24 that `make` keeps under .tools/ in this checkout, or says in one
//     line what to do.
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, realpathSync } from 'node:fs';
import { constants } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const MINIMUM = [22, 12];

function atLeast(version, minimum) {
  const [major, minor] = version.split('.').map(Number);
  return major > minimum[0] || (major === minimum[0] && minor >= minimum[1]);
}

/** The newest `.tools/node-<version>/bin/node` of this checkout that is new enough, if any. */
function keptNode(root) {
  const tools = join(root, '.tools');
  if (!existsSync(tools)) return undefined;
  const found = readdirSync(tools)
    .map((name) => /^node-(\d+\.\d+\.\d+)$/.exec(name))
    .filter((m) => m && atLeast(m[1], MINIMUM) && existsSync(join(tools, m[0], 'bin', 'node')))
    .map((m) => ({ version: m[1].split('.').map(Number), path: join(tools, m[0], 'bin', 'node') }))
    .sort(
      (a, b) => b.version[0] - a.version[0] || b.version[1] - a.version[1] || b.version[2] - a.version[2],
    );
  return found[0]?.path;
}

/** Runs this script again under `node` with `flags`; signals reach the child, its exit code becomes ours. */
function rerun(node, flags) {
  const child = spawn(node, [...flags, ...process.argv.slice(1)], { stdio: 'inherit' });
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
    process.on(signal, () => child.kill(signal));
  }
  child.on('error', (err) => {
    process.stderr.write(`platform: cannot run ${node}: ${err.message}\n`);
    process.exit(1);
  });
  child.on('exit', (code, signal) => process.exit(code ?? 128 + (constants.signals[signal] ?? 0)));
}

if (process.features?.typescript) {
  await import('../cli/main.ts');
} else if (atLeast(process.versions.node, MINIMUM)) {
  rerun(process.execPath, ['--experimental-strip-types', '--disable-warning=ExperimentalWarning']);
} else {
  // realpath: when run through a link (~/.local/bin/platform, npm link) the checkout is where the link points.
  const root = dirname(dirname(realpathSync(fileURLToPath(import.meta.url))));
  const node = keptNode(root);
  if (node) {
    rerun(node, []);
  } else {
    process.stderr.write(
      `platform: needs Node ${MINIMUM.join('.')} or newer, this is Node ${process.versions.node} (${process.execPath}); ` +
        `run \`make deps\` in ${root} to fetch Node 24 into .tools/, or put Node 24 first on PATH\n`,
    );
    process.exit(1);
  }
}
