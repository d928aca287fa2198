/**
 * Resend's domain endpoints: a tenant's sending domains with their own DKIM keys.
 *
 * DESCRIPTION
 *   POST   /domains              { name, region?, custom_return_path?, open_tracking?, click_tracking?,
 *                                tls? } → the domain with the DNS `records` to publish (DKIM TXT,
 *                                SPF MX and TXT on the return path, a DMARC suggestion).
 *   GET    /domains              { object: "list", has_more, data }.
 *   GET    /domains/:id          { object: "domain", …, records } with each record's status, and
 *                                (relay extra) `dmarc`: the DMARC policy found by RFC 9989's tree
 *                                walk at the last verification, DKIM and SPF alignment (the
 *                                return path against the domain), BIMI readiness (record published,
 *                                policy at enforcement); null before a verification.
 *   PATCH  /domains/:id          every field of the SDK's domains.update: { open_tracking?,
 *                                click_tracking?, tls?, capabilities?: { sending?, receiving? },
 *                                tracking_subdomain? } → { object, id }. capabilities.receiving
 *                                "enabled" lets the verified domain receive mail (worker/receiving/);
 *                                what the relay does not do (open and click tracking, a tracking
 *                                subdomain, enforced TLS per domain, disabling sending) is a 422
 *                                naming the field, never stored and ignored.
 *   DELETE /domains/:id          { object, id, deleted: true }; its keys go with it.
 *   POST   /domains/:id/verify   looks the records up (DoH) now → { object, id }; GET shows the
 *                                statuses (not_started, pending, verified, failed, …).
 *   POST   /relay/domains/:id/rotate-dkim  (relay extra) adds a second selector to publish; it
 *                                signs once it verifies, and the old one is retired then.
 *
 * CLAIMS (domains/core/names.ts, db/domains.ts; as Resend does it)
 *   Several tenants may hold an unverified claim on one name; the first to verify it owns it and
 *   the others' claims lapse. An unverified claim lapses DOMAIN_CLAIM_TTL_HOURS after it was made
 *   (the cron deletes it; verify answers 404 for it). A name is normalised one way (case, trailing
 *   dot, IDN to A-labels); a public suffix is refused, and so is a name at or under a domain
 *   another tenant verified.
 *
 * ERRORS
 *   422 validation_error for a bad name (a public suffix among them) or field; 409
 *   validation_error when the tenant already claims the name, or another tenant verified it or a
 *   domain above it (at POST and at verify); 404 not_found for another tenant's id or a lapsed
 *   claim.
 */
import { Hono, type Context } from "hono";
import type { z } from "zod";
import {
  addKey,
  claimOwnership,
  deleteDomain,
  domainKeys,
  getDomain,
  insertDomain,
  listDomains,
  promoteKey,
  saveVerification,
  updateDomain,
  verifiedOwners,
  type DomainRow,
} from "../../db/domains";
import { claimProblem, lineage } from "../../domains/core/names";
import { settingsOf } from "../../settings/settings";
import { recordsFor } from "../../domains/records";
import { newDkimKey, recordOptions, verifyDomain } from "../../domains/service";
import { type AppEnv } from "../http/context";
import { parseInput, readJson } from "../http/body";
import { ApiError } from "../../model/errors";
import { CreateDomainSchema, UpdateDomainSchema } from "../http/domain-schemas";
import { aligned, type DmarcFacts } from "../../compliance/core/dmarc";

const iso = (ms: number) => new Date(ms).toISOString();

function summary(d: DomainRow) {
  const capabilities = { sending: "enabled", receiving: d.receiving === 1 ? "enabled" : "disabled" } as const;
  return {
    id: d.id,
    name: d.name,
    status: d.status,
    created_at: iso(d.created_at),
    region: d.region,
    capabilities,
    open_tracking: d.open_tracking === 1,
    click_tracking: d.click_tracking === 1,
  };
}

/** What the relay does not do, refused by name rather than stored and ignored. */
function unsupported(input: z.infer<typeof UpdateDomainSchema>): string | null {
  if (input.open_tracking === true || input.click_tracking === true || input.tracking_subdomain !== undefined) {
    return (
      "`open_tracking`, `click_tracking` and `tracking_subdomain`: this relay does not track opens or clicks " +
      "(it rewrites no links and adds no pixel); only false is taken."
    );
  }
  if (input.tls === "enforced") {
    return (
      '`tls`: "enforced" per sending domain is not supported (TLS is set per transport: RELAY_TLS, provider rules\' require_tls); ' +
      'only "opportunistic" is taken.'
    );
  }
  if (input.capabilities?.sending === "disabled") {
    return "`capabilities.sending`: a domain's sending cannot be disabled here; delete the domain (DELETE /domains/:id) to stop sending from it.";
  }
  return null;
}

/** The domain's DMARC policy, alignment and BIMI readiness as its last verification found them (relay extra; null before one). */
function dmarcView(d: DomainRow) {
  if (!d.dmarc) return null;
  const f = JSON.parse(d.dmarc) as DmarcFacts;
  const records = new Map(f.record && f.foundAt ? [[f.foundAt, f.record]] : []);
  const mode = (m: "r" | "s" | undefined) => (m === "s" ? "strict" : "relaxed");
  const returnPath = `${d.return_path}.${d.name}`;
  return {
    policy: f.policy,
    record_found_at: f.foundAt,
    organizational_domain: f.organizationalDomain,
    alignment: {
      dkim: mode(f.record?.adkim),
      spf: mode(f.record?.aspf),
      dkim_aligned: true,
      spf_aligned: aligned(returnPath, d.name, f.record?.aspf ?? "r", records),
      return_path: returnPath,
    },
    bimi: { record: f.bimi.record, enforcement: f.bimi.enforcement, ready: f.bimi.ready },
    checked_at: iso(f.checkedAt),
  };
}

function full(d: DomainRow) {
  return { object: "domain" as const, ...summary(d), records: JSON.parse(d.records) as unknown[], dmarc: dmarcView(d) };
}

async function mine(c: Context<AppEnv>): Promise<DomainRow> {
  const d = await getDomain(c.env.DB, c.get("tenant"), c.req.param("id") ?? "");
  if (!d) throw new ApiError(404, "not_found", "Domain not found.");
  return d;
}

/** The /domains routes (mounted behind the API key middleware). */
export function domainRoutes() {
  const r = new Hono<AppEnv>();

  r.post("/", async (c) => {
    const input = parseInput(CreateDomainSchema, (await readJson(c, 16 * 1024)).value);
    const taken = claimProblem(input.name, c.get("tenant"), await verifiedOwners(c.env.DB, lineage(input.name)));
    if (taken !== null) throw new ApiError(409, "validation_error", taken);
    const now = Date.now();
    const id = crypto.randomUUID();
    const selector = "cohort1";
    const key = await newDkimKey(c.env, id, selector, "active", now);
    const records = recordsFor(
      input.name,
      recordOptions(c.env, selector, key.public_key, input.custom_return_path ?? "send"),
    );
    const row: DomainRow = {
      id,
      tenant_id: c.get("tenant"),
      name: input.name,
      status: "not_started",
      region: input.region ?? "us-east-1",
      return_path: input.custom_return_path ?? "send",
      open_tracking: Number(input.open_tracking ?? false),
      click_tracking: Number(input.click_tracking ?? false),
      tls: input.tls ?? "opportunistic",
      records: JSON.stringify(records),
      created_at: now,
      verified_at: null,
    };
    if ((await insertDomain(c.env.DB, row, key)) === "taken") {
      throw new ApiError(409, "validation_error", `The domain ${input.name} is already registered to this account.`);
    }
    if (input.capabilities?.receiving === "enabled") {
      await updateDomain(c.env.DB, row.tenant_id, id, { receiving: true });
      row.receiving = 1;
    }
    const { object: _object, ...body } = full(row);
    return c.json(body, 201);
  });

  r.get("/", async (c) => {
    const rows = await listDomains(c.env.DB, c.get("tenant"));
    return c.json({ object: "list", has_more: false, data: rows.map(summary) });
  });

  r.get("/:id", async (c) => c.json(full(await mine(c))));

  r.patch("/:id", async (c) => {
    const d = await mine(c);
    const input = parseInput(UpdateDomainSchema, (await readJson(c, 16 * 1024)).value);
    const refused = unsupported(input);
    if (refused) throw new ApiError(422, "validation_error", refused);
    const receiving =
      input.capabilities?.receiving === undefined ? undefined : input.capabilities.receiving === "enabled";
    await updateDomain(c.env.DB, d.tenant_id, d.id, { ...input, ...(receiving === undefined ? {} : { receiving }) });
    return c.json({ object: "domain", id: d.id });
  });

  r.delete("/:id", async (c) => {
    const d = await mine(c);
    await deleteDomain(c.env.DB, d.tenant_id, d.id);
    return c.json({ object: "domain", id: d.id, deleted: true });
  });

  r.post("/:id/verify", async (c) => {
    const d = await mine(c);
    const now = Date.now();
    if (d.verified_at === null && d.created_at < now - settingsOf(c.env).domainClaimTtlMs) {
      await deleteDomain(c.env.DB, d.tenant_id, d.id);
      throw new ApiError(404, "not_found", `Domain not found: the claim on ${d.name} lapsed unverified; add it again.`);
    }
    const taken =
      d.verified_at === null
        ? claimProblem(d.name, d.tenant_id, await verifiedOwners(c.env.DB, lineage(d.name)))
        : null;
    if (taken !== null) throw new ApiError(409, "validation_error", taken);
    const keys = await domainKeys(c.env.DB, d.id);
    const v = await verifyDomain(c.env, d, keys);
    if (v.status === "verified" && d.verified_at === null) {
      // The first to verify owns the name; the others' claims on it lapse (db/domains.ts).
      if ((await claimOwnership(c.env.DB, d, v.records, now, v.dmarc)) === "taken") {
        throw new ApiError(409, "validation_error", `The domain ${d.name} is verified by another account.`);
      }
    } else {
      await saveVerification(c.env.DB, d.id, v.records, v.status, now, v.dmarc);
    }
    if (v.promote) await promoteKey(c.env.DB, d.id, v.promote);
    return c.json({ object: "domain", id: d.id });
  });
  return r;
}

/** POST /relay/domains/:id/rotate-dkim: a second selector to publish (see header). */
export function domainRotationRoutes() {
  const r = new Hono<AppEnv>();
  r.post("/domains/:id/rotate-dkim", async (c) => {
    const d = await mine(c);
    const keys = await domainKeys(c.env.DB, d.id);
    if (keys.some((k) => k.state === "next"))
      throw new ApiError(422, "validation_error", "A rotation is already waiting for its record to verify.");
    const n = Math.max(0, ...keys.map((k) => Number(/(\d+)$/.exec(k.selector)?.[1] ?? 0))) + 1;
    const key = await newDkimKey(c.env, d.id, `cohort${n}`, "next", Date.now());
    await addKey(c.env.DB, key);
    const [dkim] = recordsFor(d.name, recordOptions(c.env, key.selector, key.public_key, d.return_path));
    const records = [...(JSON.parse(d.records) as unknown[]), dkim];
    await saveVerification(c.env.DB, d.id, records as never, d.status, Date.now());
    return c.json({ object: "domain", id: d.id, selector: key.selector, record: dkim }, 201);
  });
  return r;
}
