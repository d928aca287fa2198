/**
 * Who may send as which domain, and with which DKIM key (the accept path's sender policy).
 *
 * DESCRIPTION
 *   new SenderPolicy(env, tenant, key, prefetch?)  one per request; `prefetch` (api/http/
 *                       send-reads.ts) answers the owners of the names it read, instead of D1.
 *   authorize(domain)   the DKIM signers to use for mail from `domain`, or an ApiError:
 *     - a sending_access key restricted to a domain sends only from it (401 restricted_api_key);
 *     - a domain the tenant verified signs with its own active key (decrypted here; the private
 *       key never leaves the worker);
 *     - a domain another tenant verified, or a name under one (core/names.ts claimProblem), is
 *       refused to everyone else, whatever follows;
 *     - under COHORT_ENV development or test an unverified domain may send (signed with the
 *       operator's DKIM_KEYS when they cover it); `unverified` lists them, and the response says
 *       so in the Cohort-Unverified-Domains header;
 *     - an operator key may send from a domain of the operator's DKIM_KEYS;
 *     - anything else is 403 validation_error, Resend's "The … domain is not verified".
 *   returnPath(domain)  after authorize(domain): the domain of the message's VERP envelope
 *                       senders (worker/mail/verp.ts): `<return_path>.<domain>` for a domain the
 *                       tenant verified (its MX and SPF records are among the domain's records),
 *                       else the operator's BOUNCE_DOMAIN, else null (the From address is the
 *                       envelope sender, as before).
 *   verifiedReturnPath(domain)  the first case only (a CFBL-Address must align with the DKIM
 *                       domain, RFC 9477).
 *   verifiedDmarc(domain)  after authorize(domain): whether the tenant verified it, and the DMARC
 *                       facts its verification stored (for the compliance check).
 *   strictCompliance    the tenant's `compliance: "strict"` (tenant_settings).
 *   withNotice(res)     the response with the Cohort-Unverified-Domains header when any.
 *
 * INVARIANTS
 *   In production a tenant's mail is signed only with a key of a domain it verified, never with
 *   the operator's keys or another tenant's.
 */
import { verifiedOwners } from "../db/domains";
import { sealedKey, sendingDomains, type KeyAccess } from "../db/sending-domains";
import { claimProblem, lineage } from "./core/names";

/** Decrypted domain keys by "domainId/selector" (see privateKey). */
const DECRYPTED = new Map<string, string>();
import type { DkimSigner } from "../mail";
import { ApiError } from "../model/errors";
import { signersFor } from "./signing";
import { openSecret, secretsKey } from "../lib/secrets";
import { settingsOf } from "../settings/settings";

/** Resend's 403 for a sender domain the tenant has not verified. */
function notVerified(domain: string): ApiError {
  return new ApiError(
    403,
    "validation_error",
    `The ${domain} domain is not verified. Please, add and verify your domain (POST /domains, then POST /domains/:id/verify).`,
  );
}

export class SenderPolicy {
  readonly unverified = new Set<string>();
  private readonly seen = new Map<string, Promise<DkimSigner[]>>();
  private readonly returnPaths = new Map<string, string>();
  /** The DMARC facts (JSON, or null) of each domain the tenant verified that authorize() saw. */
  private readonly dmarc = new Map<string, string | null>();

  constructor(
    private readonly env: Env,
    readonly tenant: string,
    private readonly key: KeyAccess | undefined,
    private readonly prefetch?: { ownerNames: ReadonlySet<string>; owners: ReadonlyMap<string, string> },
  ) {}

  /** Which tenants verified `names` (name → tenant): as read with the key when it read them all, else from D1. */
  private async owners(names: string[]): Promise<ReadonlyMap<string, string>> {
    const p = this.prefetch;
    return p && names.every((n) => p.ownerNames.has(n)) ? p.owners : verifiedOwners(this.env.DB, names);
  }

  /** See the header. `domain` is an ASCII domain (punycode), any case. */
  authorize(domain: string): Promise<DkimSigner[]> {
    const d = domain.toLowerCase();
    let p = this.seen.get(d);
    if (!p) {
      p = this.decide(d);
      this.seen.set(d, p);
    }
    return p;
  }

  private async decide(domain: string): Promise<DkimSigner[]> {
    const key = this.key;
    if (key?.permission === "sending_access" && key.domainId !== null && key.domainName !== domain) {
      throw new ApiError(
        401,
        "restricted_api_key",
        `This API key may only send from ${key.domainName ?? "its domain (which no longer exists)"}.`,
      );
    }
    const own = this.key?.verified
      ? this.key.verified.find((d) => d.name === domain)
      : (await sendingDomains(this.env.DB, this.tenant, [domain]))[0];
    if (own) {
      this.returnPaths.set(domain, `${own.return_path}.${domain}`);
      this.dmarc.set(domain, own.dmarc ?? null);
      const privateKey = await this.privateKey(
        own.id,
        own.selector,
        "private_sealed" in own ? (own.private_sealed as string) : null,
      );
      return [
        {
          domain,
          selector: own.selector,
          algorithm: own.algorithm as DkimSigner["algorithm"],
          privateKey,
          signTime: new Date(),
        },
      ];
    }
    // The fallbacks below (development, the operator's DKIM_KEYS) never cover a domain that
    // another tenant proved it owns: one row read, only on these paths.
    const fallback = settingsOf(this.env).local || key?.role === "operator";
    if (fallback && claimProblem(domain, this.tenant, await this.owners(lineage(domain))) !== null)
      throw notVerified(domain);
    if (settingsOf(this.env).local) {
      this.unverified.add(domain);
      return signersFor(this.env, domain);
    }
    if (key?.role === "operator") {
      const operatorKeys = signersFor(this.env, domain);
      if (operatorKeys.length > 0) return operatorKeys;
    }
    throw notVerified(domain);
  }

  /**
   * A domain key's private half, decrypted once per isolate: keyed by domain and selector, which
   * the caller has just read as active, so a deleted domain or a retired key is never used.
   */
  private async privateKey(domainId: string, selector: string, sealed: string | null): Promise<string> {
    const id = `${domainId}/${selector}`;
    const hit = DECRYPTED.get(id);
    if (hit !== undefined) return hit;
    const s = sealed ?? (await sealedKey(this.env.DB, domainId, selector));
    if (s === null)
      throw new ApiError(403, "validation_error", "The domain's signing key is gone; verify the domain again.");
    const pem = await openSecret(await secretsKey(this.env), s);
    if (DECRYPTED.size >= 1000) DECRYPTED.clear();
    DECRYPTED.set(id, pem);
    return pem;
  }

  /** Until when the complaint-rate brake holds the tenant's bulk mail (epoch ms), or null. */
  get bulkPausedUntil(): number | null {
    return this.key?.bulkPausedUntil ?? null;
  }

  /** The tenant's default `unsubscribe` for its send requests (tenant_settings), or null. */
  get unsubscribeDefault(): true | { topic?: string } | null {
    return this.key?.unsubscribe ?? null;
  }

  /** After authorize(domain): whether the tenant verified it, and its DMARC facts as stored at verification (null: none kept). */
  verifiedDmarc(domain: string): { verified: boolean; facts: string | null } {
    const d = domain.toLowerCase();
    return { verified: this.dmarc.has(d), facts: this.dmarc.get(d) ?? null };
  }

  /** The tenant's compliance setting refuses what the check warns of. */
  get strictCompliance(): boolean {
    return this.key?.compliance === "strict";
  }

  /** After authorize(domain): the return-path host of a domain the tenant verified, else null. */
  verifiedReturnPath(domain: string): string | null {
    return this.returnPaths.get(domain.toLowerCase()) ?? null;
  }

  /** See the header. */
  returnPath(domain: string): string | null {
    return this.returnPaths.get(domain.toLowerCase()) ?? settingsOf(this.env).bounceDomain;
  }

  /** `res` with the Cohort-Unverified-Domains header when unverified domains were let through. */
  withNotice(res: Response): Response {
    if (this.unverified.size === 0) return res;
    const out = new Response(res.body, res);
    out.headers.set("Cohort-Unverified-Domains", [...this.unverified].sort().join(", "));
    out.headers.set(
      "Cohort-Warning",
      "sent from a domain that is not verified: allowed only under COHORT_ENV development or test",
    );
    return out;
  }
}
