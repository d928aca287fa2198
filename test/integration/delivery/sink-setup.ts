/**
 * globalSetup of the `delivery` test project (runs in Node): starts the scripted SMTP sink
 * (scripts/lib/smtp-catcher.ts, smtp-server from npm) on 127.0.0.1, port 0, and hands its SMTP
 * and HTTP listing ports to the tests with `provide`, plus a port nothing listens on. Everything
 * is stopped when the run ends.
 */
import { createServer, type AddressInfo } from "node:net";
import type { TestProject } from "vitest/node";
import { startCatcher } from "../../../scripts/lib/smtp-catcher";

declare module "vitest" {
  export interface ProvidedContext {
    sink: { smtpPort: number; httpPort: number; closedPort: number };
  }
}

/** A port that was free a moment ago and has no listener now. */
function closedPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address() as AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

/** Starts the sink; returns its teardown. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const catcher = await startCatcher({ scripted: true });
  project.provide("sink", { smtpPort: catcher.smtpPort, httpPort: catcher.httpPort, closedPort: await closedPort() });
  return () => catcher.close();
}
