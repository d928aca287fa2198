/**
 * globalSetup of the `webhooks` test project (runs in Node): starts the scripted SMTP sink
 * (scripts/lib/smtp-catcher.ts) that the relay delivers to, and the webhook receivers' control
 * API (receiver.ts), and provides their ports and URL to the tests. Everything is stopped when
 * the run ends.
 */
import type { TestProject } from "vitest/node";
import { startCatcher } from "../../../scripts/lib/smtp-catcher";
import { startReceiverControl } from "./receiver";

declare module "vitest" {
  export interface ProvidedContext {
    webhookSink: { smtpPort: number; httpPort: number };
    receivers: { url: string };
  }
}

/** Starts the sink and the receiver control; returns their teardown. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const catcher = await startCatcher({ scripted: true });
  const control = await startReceiverControl();
  project.provide("webhookSink", { smtpPort: catcher.smtpPort, httpPort: catcher.httpPort });
  project.provide("receivers", { url: control.url });
  return async () => {
    await control.close();
    await catcher.close();
  };
}
