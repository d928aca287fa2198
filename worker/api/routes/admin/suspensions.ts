/**
 * Suspensions under /relay/suspensions (operator key only): a policy key (a destination, tenant,
 * transport, site, egress, campaign or bulk mail) held back until a time, in the Transport DOs
 * that hold it. The other pickup-policy fields are policies.ts's.
 *
 * DESCRIPTION
 *   POST   /relay/suspensions    { target, transport?, name, ttl_seconds } → 201; other policy
 *                                fields of the key (caps, rates) are kept.
 *   GET    /relay/suspensions    suspensions in force.
 *   DELETE /relay/suspensions/:target/:name?transport=   resume.
 *
 * ERRORS
 *   403 restricted_api_key for a tenant key; 422 validation_error for bad input; 404 not_found
 *   for an unknown transport or suspension.
 */
import { Hono } from "hono";
import {
  activeSuspensions,
  EVERYWHERE,
  resumeRule,
  suspendRule,
  suspensionKey,
  type SuspensionTarget,
} from "../../../dashboard/core/operator-views";
import { type AppEnv } from "../../http/context";
import { parseInput, readJson } from "../../http/body";
import { ApiError } from "../../../model/errors";
import { ResumeQuerySchema, SuspendSchema, SuspensionTargetSchema } from "./schemas";
import { allTransports, inspectAll, transportStub } from "../../../policy/transports";
import { settingsOf } from "../../../settings/settings";
import { iso } from "./queue";

/** Where a suspension lives: its policy key and the transports whose DO holds it. */
async function placeSuspension(env: Env, target: SuspensionTarget, name: string, transport: string | undefined) {
  const all = await allTransports(env);
  // A tenant, site, egress, campaign or bulk key is held by every transport (a site's domains may be routed to any).
  const everywhere = EVERYWHERE.includes(target);
  const t = target === "transport" ? name : (transport ?? settingsOf(env).defaultTransport);
  if (!everywhere && !all.includes(t))
    throw new ApiError(404, "not_found", `Transport ${JSON.stringify(t)} is not configured.`);
  const key = suspensionKey(target, name, t);
  if (key === null) throw new ApiError(422, "validation_error", "Invalid `name` for this target.");
  return { key, transports: everywhere ? all : [t], transport: everywhere ? null : t };
}

/** The suspension routes (mounted under /relay behind the API key and the operator check). */
export function suspensionRoutes() {
  const r = new Hono<AppEnv>();

  r.post("/suspensions", async (c) => {
    const body = parseInput(SuspendSchema, (await readJson(c, 16 * 1024)).value);
    const place = await placeSuspension(c.env, body.target, body.name, body.transport);
    const until = Math.floor(Date.now() / 1000) + body.ttl_seconds;
    const inspections = await inspectAll(c.env, place.transports);
    await Promise.all(
      inspections.map((i) =>
        transportStub(c.env, i.transport).setPolicy(
          place.key,
          suspendRule(i.policies.find((p) => p.key === place.key)?.rule, until),
        ),
      ),
    );
    return c.json(
      {
        object: "suspension",
        target: body.target,
        transport: place.transport,
        name: body.name,
        key: place.key,
        until: iso(until),
        transports: place.transports,
      },
      201,
    );
  });

  r.get("/suspensions", async (c) => {
    const inspections = await inspectAll(c.env, await allTransports(c.env));
    const policies = inspections.flatMap((i) =>
      i.policies.map((p) => ({ transport: i.transport, key: p.key, rule: p.rule })),
    );
    const data = activeSuspensions(policies, Math.floor(Date.now() / 1000)).map((s) => ({
      object: "suspension",
      target: s.target,
      transport: s.transport,
      name: s.name,
      key: s.key,
      until: iso(s.until),
      transports: s.transports,
      set_by: s.setBy,
    }));
    return c.json({ object: "list", data });
  });

  r.delete("/suspensions/:target/:name", async (c) => {
    const target = parseInput(SuspensionTargetSchema, c.req.param("target"), "`target`:");
    const q = parseInput(ResumeQuerySchema, c.req.query());
    const name = c.req.param("name");
    const place = await placeSuspension(c.env, target, name, q.transport);
    const now = Math.floor(Date.now() / 1000);
    const holders = (await inspectAll(c.env, place.transports))
      .map((i) => ({ transport: i.transport, rule: i.policies.find((p) => p.key === place.key)?.rule }))
      .filter((h) => h.rule?.suspendedUntil !== undefined && h.rule.suspendedUntil > now);
    if (holders.length === 0) throw new ApiError(404, "not_found", "Suspension not found.");
    await Promise.all(holders.map((h) => transportStub(c.env, h.transport).setPolicy(place.key, resumeRule(h.rule))));
    return c.json({ object: "suspension", target, transport: place.transport, name, key: place.key, deleted: true });
  });

  return r;
}
