// What a release promises an operator, read from the repository itself: package.json's version is semantic
// versioning and newer than every release CHANGELOG.md lists; CHANGELOG.md is newest first, each release dated,
// pinned to a commit of this history and sorted into the known kinds of change; and the migrations since the
// newest release only expand the schema (docs/operations.md § Upgrading), the released ones left as they were.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_DIR, releasesOf } from '../helpers/previous-release.ts';

// semver.org's own pattern.
const SEMVER =
  /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$/;
const KINDS = ['Added', 'Changed', 'Fixed', 'Security', 'Upgrade notes'];
const MIGRATION_DIRS = ['idp/migrations', 'tools/migrations'];

/** Semantic-versioning precedence (§11): negative when a < b. */
export function compareVersions(a: string, b: string): number {
  const [ma, mb] = [SEMVER.exec(a), SEMVER.exec(b)];
  if (!ma || !mb) throw new Error(`not a semantic version: ${ma ? b : a}`);
  for (let i = 1; i <= 3; i++) if (Number(ma[i]) !== Number(mb[i])) return Number(ma[i]) - Number(mb[i]);
  const [pa, pb] = [ma[4], mb[4]];
  if (pa === pb) return 0;
  if (pa === undefined) return 1;
  if (pb === undefined) return -1;
  const [xa, xb] = [pa.split('.'), pb.split('.')];
  for (let i = 0; i < Math.min(xa.length, xb.length); i++) {
    const [x, y] = [xa[i]!, xb[i]!];
    if (x === y) continue;
    const [nx, ny] = [/^\d+$/.test(x), /^\d+$/.test(y)];
    if (nx && ny) return Number(x) - Number(y);
    if (nx !== ny) return nx ? -1 : 1;
    return x < y ? -1 : 1;
  }
  return xa.length - xb.length;
}

/**
 * Statements that take something away from the previous release's code: a dropped or renamed object, a column
 * narrowed (type, NOT NULL), its default dropped, or one added NOT NULL without a default (the old code's
 * INSERTs would fail). Comments are ignored.
 */
export function contractions(sql: string): string[] {
  const code = sql.replace(/--[^\n]*/g, '').replace(/\/\*[\s\S]*?\*\//g, '');
  const statements = code
    .split(';')
    .map((s) => s.replace(/\s+/g, ' ').trim())
    .filter(Boolean);
  return statements.filter(
    (s) =>
      /\bDROP\s+(TABLE|COLUMN|INDEX|CONSTRAINT|SCHEMA|TYPE|VIEW|FUNCTION|TRIGGER|SEQUENCE)\b/i.test(s) ||
      /^ALTER\s+TABLE\b.*\bDROP\s+(?!NOT\s+NULL\b)\w+/i.test(s) ||
      /\bRENAME\b/i.test(s) ||
      /\bALTER\s+COLUMN\s+\S+\s+(SET\s+NOT\s+NULL|(SET\s+DATA\s+)?TYPE)\b/i.test(s) ||
      (/\bADD\s+COLUMN\b/i.test(s) && /\bNOT\s+NULL\b/i.test(s) && !/\bDEFAULT\b/i.test(s)),
  );
}

const git = (...args: string[]) => execFileSync('git', ['-C', REPO_DIR, ...args], { encoding: 'utf8' });
const changelog = readFileSync(join(REPO_DIR, 'CHANGELOG.md'), 'utf8');
const releases = releasesOf(changelog);
/** A release's section of CHANGELOG.md (its heading to the next), if it lists that version. */
const sectionOf = (v: string) => changelog.split(/^## /m).find((section) => section.startsWith(`${v} — `));
const { version } = JSON.parse(readFileSync(join(REPO_DIR, 'package.json'), 'utf8')) as { version: string };

describe('versions and the changelog', () => {
  it('package.json follows semantic versioning and is newer than every release', () => {
    expect(version).toMatch(SEMVER);
    expect(releases.length).toBeGreaterThan(0);
    for (const r of releases) expect(compareVersions(version, r.version), r.version).toBeGreaterThan(0);
  });

  it('CHANGELOG.md: Unreleased first, then releases newest first, each dated, pinned and sorted into kinds', () => {
    const headings = [...changelog.matchAll(/^## (.+)$/gm)].map((m) => m[1]!);
    expect(headings[0]).toBe('Unreleased');
    expect(headings.slice(1)).toEqual(releases.map((r) => `${r.version} — ${r.date}`));
    for (let i = 1; i < releases.length; i++) {
      expect(compareVersions(releases[i - 1]!.version, releases[i]!.version)).toBeGreaterThan(0);
      expect(releases[i - 1]!.date >= releases[i]!.date).toBe(true);
    }
    for (const r of releases)
      expect(() => git('cat-file', '-e', `${r.commit}^{commit}`), r.commit).not.toThrow();
    const kinds = [...changelog.matchAll(/^### (.+)$/gm)].map((m) => m[1]!);
    expect(kinds.filter((k) => !KINDS.includes(k))).toEqual([]);
  });

  it('the compare and the pin reader hold what they claim', () => {
    expect(compareVersions('1.1.0-dev', '1.0.0')).toBeGreaterThan(0);
    expect(compareVersions('1.1.0-dev', '1.1.0')).toBeLessThan(0);
    expect(compareVersions('1.0.0-alpha.2', '1.0.0-alpha.10')).toBeLessThan(0);
    expect(compareVersions('2.0.0', '1.9.9')).toBeGreaterThan(0);
    expect(() => releasesOf('## 2.0.0 — 2027-01-01\n\nno pin here\n')).toThrow(/names no commit/);
  });
});

describe('migrations since the newest release only expand', () => {
  const [newest] = releases;
  const released = new Set(
    git('ls-tree', '-r', '--name-only', newest!.commit, '--', ...MIGRATION_DIRS)
      .split('\n')
      .filter(Boolean),
  );
  const current = MIGRATION_DIRS.flatMap((dir) =>
    readdirSync(join(REPO_DIR, dir))
      .filter((f) => f.endsWith('.sql'))
      .map((f) => `${dir}/${f}`),
  );

  it('every migration of the release is still here, unchanged (a database that applied it never sees an edit)', () => {
    for (const file of released) {
      expect(current, file).toContain(file);
      expect(readFileSync(join(REPO_DIR, file), 'utf8'), file).toBe(git('show', `${newest!.commit}:${file}`));
    }
  });

  it('a migration added since drops, renames or narrows nothing, unless it is a contraction the changelog announces', () => {
    const added = current.filter((f) => !released.has(f));
    const offending: string[] = [];
    for (const file of added) {
      const sql = readFileSync(join(REPO_DIR, file), 'utf8');
      // A contraction: its file says which release announced it, and that release's notes name the file.
      const announced = /^-- contraction announced in CHANGELOG\.md (\S+)/m.exec(sql)?.[1];
      if (announced && sectionOf(announced)?.includes(file.split('/').pop()!)) continue;
      for (const s of contractions(sql)) offending.push(`${file}: ${s.slice(0, 160)}`);
    }
    expect(offending).toEqual([]);
  });

  it('the contraction check sees what would break the previous release', () => {
    expect(contractions('ALTER TABLE platform.x DROP COLUMN y;')).toHaveLength(1);
    expect(contractions('ALTER TABLE platform.x RENAME COLUMN y TO z;')).toHaveLength(1);
    expect(contractions('ALTER TABLE platform.x ALTER COLUMN y TYPE bigint;')).toHaveLength(1);
    expect(contractions('ALTER TABLE platform.x ALTER COLUMN y SET NOT NULL;')).toHaveLength(1);
    expect(contractions('ALTER TABLE platform.x ADD COLUMN y text NOT NULL;')).toHaveLength(1);
    expect(contractions('DROP TABLE platform.x;')).toHaveLength(1);
    expect(contractions("ALTER TABLE platform.x ADD COLUMN y text NOT NULL DEFAULT '';")).toEqual([]);
    expect(contractions('ALTER TABLE platform.x ADD COLUMN y text; -- DROP COLUMN in a comment')).toEqual([]);
    expect(contractions('ALTER TABLE platform.x ALTER COLUMN y DROP DEFAULT;')).toHaveLength(1);
    expect(contractions('ALTER TABLE platform.x ALTER COLUMN y DROP NOT NULL;')).toEqual([]);
    expect(contractions('CREATE INDEX x_y ON platform.x (y);')).toEqual([]);
  });
});
