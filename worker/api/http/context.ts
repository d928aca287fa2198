/** The Hono environment every route of the HTTP API runs in. */
import type { KeyAccess } from "../../db/domains";

/** Per-request variables. */
export type Vars = { requestId: string; tenant: string; key: KeyAccess };

/** The Hono environment of every route. */
export type AppEnv = { Bindings: Env; Variables: Vars };
