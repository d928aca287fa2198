/**
 * `npm start`'s local mail catcher: starts the catch-all SMTP server (lib/smtp-catcher.ts) on
 * 127.0.0.1 — SMTP on CATCHER_PORT (default 2526) and its HTTP listing on the next port, when
 * free, else any free ports — then runs `npm run dev` on PORT (default 8787) with SMARTHOST
 * pointing the default transport at it and DEV_MAILBOX_URL
 * pointing GET /relay/dev/mailbox at its listing. Stops the catcher when wrangler exits, and
 * passes SIGINT/SIGTERM on to wrangler. DEV_PATH_ORIGINS from the environment (e.g.
 * "http://127.0.0.1:8000" for a local file server) is passed on: the only loopback origins an
 * attachment `path` may reach. The catcher's own listing is never one of them (it holds every
 * tenant's mail; only an operator key reads it, through GET /relay/dev/mailbox).
 *
 * wrangler's inspector listens on INSPECTOR_PORT (default 9229, else a free port; Chrome's
 * chrome://inspect finds it there). Once the relay answers /health, the DevTools Network events
 * wrangler's inspector proxy has the Worker send for every subrequest are turned off
 * (lib/cdp.ts, stopNetworkCapture): while no DevTools is attached the proxy keeps them all in
 * memory and writes them to wrangler's debug log. DevTools turns them on again when it attaches,
 * and so does wrangler when it reloads the Worker after an edit.
 */
import { spawn } from "node:child_process";
import { stopNetworkCapture } from "./lib/cdp";
import { freePort, waitHealthy } from "./lib/dev-server";
import { startCatcher, type Catcher } from "./lib/smtp-catcher";
import { DEV_KEY } from "./lib/dev-key";

/** A port from the environment, or the default. */
function portOf(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > 65535) {
    console.error(`${name} must be a port number (1–65535), not ${JSON.stringify(raw)}`);
    process.exit(2);
  }
  return n;
}

const PORT = portOf("PORT", 8787);
const SMTP_PORT = portOf("CATCHER_PORT", 2526);
const HTTP_PORT = SMTP_PORT === 65535 ? SMTP_PORT - 1 : SMTP_PORT + 1;

/** The catcher on the fixed dev ports, or on free ones when those are taken. */
async function start(): Promise<Catcher> {
  try {
    return await startCatcher({ smtpPort: SMTP_PORT, httpPort: HTTP_PORT });
  } catch {
    return startCatcher();
  }
}

const catcher = await start();
const smarthost = `[127.0.0.1]:${catcher.smtpPort}`;
const mailbox = `http://127.0.0.1:${catcher.httpPort}/messages`;
const INSPECTOR = await freePort(portOf("INSPECTOR_PORT", 9229)).catch(() => freePort());
const pathOrigins = process.env.DEV_PATH_ORIGINS ? ["--var", `DEV_PATH_ORIGINS:${process.env.DEV_PATH_ORIGINS}`] : [];
const child = spawn(
  "npm",
  [
    "run",
    "dev",
    "--",
    "--inspector-port",
    String(INSPECTOR),
    "--var",
    `SMARTHOST:${smarthost}`,
    "--var",
    `DEV_MAILBOX_URL:${mailbox}`,
    ...pathOrigins,
  ],
  { stdio: "inherit", env: { ...process.env, PORT: String(PORT) } },
);
for (const sig of ["SIGINT", "SIGTERM"] as const) process.on(sig, () => child.kill(sig));
child.on("exit", (code) => {
  void catcher.close().finally(() => process.exit(code ?? 0));
});
// Once the relay answers, turn the inspector's Network events off (see the header).
// Then say what a newcomer needs, last, below wrangler's own lines.
const base = `http://127.0.0.1:${PORT}`;
waitHealthy(base, child, () => "", 120_000).then(
  async () => {
    const capture = await stopNetworkCapture(INSPECTOR).then(
      () =>
        `  Inspector:  127.0.0.1:${INSPECTOR} (chrome://inspect; per-subrequest Network events off until DevTools attaches)`,
      (e: unknown) =>
        `  Inspector:  127.0.0.1:${INSPECTOR} (could not turn its Network events off: ${e instanceof Error ? e.message.split("\n")[0] : String(e)})`,
    );
    console.log(readyBanner(base, smarthost, capture));
  },
  () => {},
);

/** What `npm start` ends with: where the relay is, the key, the dashboard and a first email. */
function readyBanner(url: string, smtp: string, inspector: string): string {
  return [
    "",
    "  Cohort is running.",
    `  Relay:      ${url}`,
    `  API key:    ${DEV_KEY}   (an operator key of tenant "dev", local state only)`,
    `  Dashboard:  ${url}/relay/dashboard`,
    `  Mail lands in the local SMTP catcher ${smtp}; list it with GET ${url}/relay/dev/mailbox`,
    inspector,
    "",
    "  Send a first email:",
    `    curl -sS ${url}/emails -H "Authorization: Bearer ${DEV_KEY}" -H "Content-Type: application/json" \\`,
    `      -d '{"from": "Acme <hello@acme.example>", "to": ["ann@example.com"], "subject": "Hello", "text": "Hi Ann!"}'`,
    "",
  ].join("\n");
}
