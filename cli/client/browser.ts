import { spawn } from 'node:child_process';

/**
 * Best effort: asks the desktop to open `url` and never waits for or fails on it. The caller always prints
 * the URL too, since on a server, in a container or over SSH there is no browser to open.
 * `command` is the user's BROWSER setting when given, else the platform's opener.
 */
export function openBrowser(url: string, command?: string): void {
  const [cmd, args] = command
    ? [command, [url]]
    : process.platform === 'darwin'
      ? ['open', [url]]
      : process.platform === 'win32'
        ? ['rundll32', ['url.dll,FileProtocolHandler', url]]
        : ['xdg-open', [url]];
  try {
    const child = spawn(cmd, args, { stdio: 'ignore', detached: true });
    child.on('error', () => {}); // no opener installed: the printed URL is the fallback
    child.unref();
  } catch {
    // same: spawn can throw synchronously for an invalid command
  }
}
