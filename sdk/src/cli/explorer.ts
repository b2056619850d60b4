/**
 * Opening a URL in the user's browser, only when there is one: a desktop session on Linux
 * (DISPLAY or WAYLAND_DISPLAY), macOS, or Windows — never in CI or over plain SSH, where the
 * command prints the URL instead. Only http(s) URLs are handed to the opener, as one argument.
 */
import { spawn } from "node:child_process";

type Env = Readonly<Record<string, string | undefined>>;

/** The opener command for this platform and environment, or null when no browser is available. */
export function browserOpener(env: Env, platform: NodeJS.Platform = process.platform): { command: string; args: string[] } | null {
  if (env.CI !== undefined && env.CI !== "" && env.CI !== "false") return null;
  if (platform === "darwin") return { command: "open", args: [] };
  // explorer.exe takes the URL as one argument; cmd /c start would parse & in it.
  if (platform === "win32") return { command: "explorer.exe", args: [] };
  const desktop = (env.DISPLAY ?? "") !== "" || (env.WAYLAND_DISPLAY ?? "") !== "";
  return desktop ? { command: "xdg-open", args: [] } : null;
}

/** True when the opener started; false when there is none or it could not be run. */
export async function openInBrowser(url: string, env: Env): Promise<boolean> {
  if (!/^https?:\/\/[^\s]+$/i.test(url)) return false;
  const opener = browserOpener(env);
  if (opener === null) return false;
  return new Promise((resolve) => {
    const child = spawn(opener.command, [...opener.args, url], { detached: true, stdio: "ignore", env: { ...env } as NodeJS.ProcessEnv });
    child.once("error", () => resolve(false));
    child.once("spawn", () => {
      child.unref();
      resolve(true);
    });
  });
}
