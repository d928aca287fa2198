/**
 * globalSetup of the `delivery-tls` test project (runs in Node): smarthosts that offer STARTTLS
 * and require AUTH (scripted-sinks.ts), provided to the tests as `tlsSinks`:
 *   trusted    certificate signed by the test CA that vitest.config.ts makes workerd trust
 *              (test/fixtures/tls), AUTH PLAIN and LOGIN with the project's credentials;
 *   login      the same, offering AUTH LOGIN only;
 *   wrongpw    the same certificate, but it expects another password (535 for ours);
 *   untrusted  a self-signed certificate that is in no trust store;
 *   pinned     a self-signed certificate the tests chose to trust (vitest.config.ts adds it to
 *              NODE_EXTRA_CA_CERTS): the only way to accept a self-signed certificate here.
 * Everything is stopped when the run ends.
 */
import { readFileSync } from "node:fs";
import type { TestProject } from "vitest/node";
import { startScriptedSinks } from "../scripted-sinks";

declare module "vitest" {
  export interface ProvidedContext {
    tlsSinks: { ports: Record<string, number>; statsUrl: string };
  }
}

/** The credentials of the delivery-tls project (vitest.config.ts RELAY_USERNAME / RELAY_PASSWORD). */
export const RELAY_USER = { username: "cohort", password: "s3cret-pass" };

const fixture = (name: string) => readFileSync(new URL(`../../../fixtures/tls/${name}`, import.meta.url), "utf8");

/** Starts the smarthosts; returns their teardown. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const trusted = { key: fixture("trusted-key.pem"), cert: fixture("trusted.pem") };
  const sinks = await startScriptedSinks([
    { name: "trusted", tls: trusted, auth: RELAY_USER },
    { name: "login", tls: trusted, auth: { ...RELAY_USER, methods: ["LOGIN"] } },
    { name: "wrongpw", tls: trusted, auth: { username: RELAY_USER.username, password: "another-password" } },
    {
      name: "untrusted",
      tls: { key: fixture("self-signed-key.pem"), cert: fixture("self-signed.pem") },
      auth: RELAY_USER,
    },
    { name: "pinned", tls: { key: fixture("pinned-key.pem"), cert: fixture("pinned.pem") }, auth: RELAY_USER },
  ]);
  project.provide("tlsSinks", { ports: sinks.ports, statsUrl: sinks.statsUrl });
  return () => sinks.close();
}
