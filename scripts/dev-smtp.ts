/**
 * `npm start`'s local mail catcher: starts the catch-all SMTP server (lib/smtp-catcher.ts) on
 * 127.0.0.1 — SMTP on CATCHER_PORT (default 2526) and its HTTP listing on the next port, when
 * free, else any free ports — then runs `npm run dev` on PORT (default 8787) with SMARTHOST
 * pointing the default transport at it and DEV_MAILBOX_URL
 * pointing GET /relay/dev/mailbox at its listing. Stops the catcher when wrangler exits, and
 * passes SIGINT/SIGTERM on to wrangler.
 */
import { spawn } from "node:child_process";
import { startCatcher, type Catcher } from "./lib/smtp-catcher";

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
console.log(`\n  Local SMTP catcher: ${smarthost} (mail to any address lands here)\n  See what arrived: GET http://127.0.0.1:${PORT}/relay/dev/mailbox\n`);
const child = spawn("npm", ["run", "dev", "--", "--var", `SMARTHOST:${smarthost}`, "--var", `DEV_MAILBOX_URL:${mailbox}`], { stdio: "inherit", env: { ...process.env, PORT: String(PORT) } });
for (const sig of ["SIGINT", "SIGTERM"] as const) process.on(sig, () => child.kill(sig));
child.on("exit", (code) => {
  void catcher.close().finally(() => process.exit(code ?? 0));
});
