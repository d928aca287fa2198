/** The Hono environment every route of the HTTP API runs in. */
import type { KeyAccess } from "../../db/sending-domains";
import type { SendPrefetch } from "./send-reads";

/** Per-request variables. */
export type Vars = {
  requestId: string;
  tenant: string;
  key: KeyAccess;
  /** Gives the request's accept slot back before it ends (accept-gate.ts; at most once). */
  leaveGate?: () => void;
  /** What a send request read with its key (send-reads.ts), when it did. */
  prefetch?: SendPrefetch;
};

/** The Hono environment of every route. */
export type AppEnv = { Bindings: Env; Variables: Vars };
