// Debian's Chromium, headless, through playwright-core, with a fresh
// profile and every request to anything but `origin` blocked and counted
// (the bench pages must load nothing from a hub or CDN).
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { chromium } from "playwright-core";

export const CHROMIUM = "/usr/lib/chromium/chromium";

/** {context, page, blocked (URLs), close()}; `extraArgs` go to Chromium. */
export async function openPage(origin, extraArgs = []) {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), "rlx-bench-web-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      ...extraArgs,
      "--no-sandbox",
      "--no-first-run",
      "--disable-quic",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  const blocked = [];
  await context.route("**/*", (route) => {
    const u = route.request().url();
    if (u.startsWith(origin + "/")) return route.continue();
    blocked.push(u);
    return route.abort();
  });
  const page = context.pages()[0] ?? (await context.newPage());
  const close = async () => {
    await context.close();
    fs.rmSync(profile, { recursive: true, force: true });
  };
  return { context, page, blocked, close };
}
