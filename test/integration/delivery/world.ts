/**
 * The small mail world of the delivery tests (bench/world/world.ts): 40 domains under
 * world.test on 127.78.x.y, served by a world sink on the catcher's port (MX_PORT) and answered
 * by the fixture resolver (doh-server.ts) — a quarter of them greylist for 1 s, the back-off of
 * these projects' scheduler (1–2 s), as postgrey's delay equals Postfix's back-off.
 */
import { createWorld, type World } from "../../../bench/world/world";

export const TEST_WORLD: World = createWorld({
  domains: 40,
  seed: 3,
  net: 78,
  suffix: "world.test",
  bigDomains: 2,
  greylistMs: 1000,
  shares: { greylist: 0.25, strict: 0.1, limited: 0, slow: 0, down: 0, timeout: 0, flaky: 0 },
});
