/** Recipient rewriting and route resolution (pure), table-driven. */
import { describe, expect, it } from "vitest";
import type { Routing } from "../../../worker/db/routing";
import { resolveRecipient, rewriteAddress } from "../../../worker/classify/resolve";
import { relayTarget } from "../../../worker/delivery/plan";
import { createMxConfig, startMxLookup } from "../../../worker/net/core/mx";

const routing: Routing = {
  routes: [
    { tenant_id: null, pattern: "corp.example", transport: "relay", nexthop: null },
    { tenant_id: null, pattern: "*.big.example", transport: "bulk", nexthop: null },
    { tenant_id: null, pattern: "*.example", transport: "wide", nexthop: "[wide.test]:2525" },
    { tenant_id: "acme", pattern: "corp.example", transport: "acme-relay", nexthop: null },
    { tenant_id: "globex", pattern: "*", transport: "globex-all", nexthop: null },
  ],
  transports: new Map([
    ["relay", "[smtp.relay.test]:587"],
    ["bulk", null],
    ["smtp", null],
  ]),
};
const defaults = { transport: "smtp", smarthost: "" };

describe("rewriteAddress", () => {
  it.each([
    { name: "lower-cases the domain only", input: "John.Doe@Example.COM", want: "John.Doe@example.com" },
    { name: "converts an IDN domain to punycode", input: "info@Bücher.example", want: "info@xn--bcher-kva.example" },
    { name: "keeps an ASCII domain as is", input: "a@b.example", want: "a@b.example" },
    { name: "keeps an address literal", input: "a@[IPv6:2606:4700::ab]", want: "a@[IPv6:2606:4700::ab]" },
    { name: "keeps a quoted or UTF-8 local part", input: '"john doe"@Example.com', want: '"john doe"@example.com' },
  ])("$name", ({ input, want }) => {
    expect(rewriteAddress(input)).toBe(want);
  });
});

describe("resolveRecipient", () => {
  it.each([
    {
      name: "exact domain, transport's fixed nexthop",
      addr: "a@corp.example",
      tenant: "x",
      want: { transport: "relay", nexthop: "[smtp.relay.test]:587" },
    },
    {
      name: "a tenant's own route beats the global one",
      addr: "a@corp.example",
      tenant: "acme",
      want: { transport: "acme-relay", nexthop: "corp.example" },
    },
    {
      name: "longest *.suffix wins over a shorter one",
      addr: "a@mx.big.example",
      tenant: "x",
      want: { transport: "bulk", nexthop: "mx.big.example" },
    },
    {
      name: "*.suffix does not match the bare domain",
      addr: "a@big.example",
      tenant: "x",
      want: { transport: "wide", nexthop: "[wide.test]:2525" },
    },
    {
      name: "a tenant's * catches everything else for it",
      addr: "a@other.test",
      tenant: "globex",
      want: { transport: "globex-all", nexthop: "other.test" },
    },
    {
      name: "an exact route still beats a tenant's *",
      addr: "a@corp.example",
      tenant: "globex",
      want: { transport: "relay", nexthop: "[smtp.relay.test]:587" },
    },
    {
      name: "no route: the default transport to the recipient domain",
      addr: "a@other.test",
      tenant: "x",
      want: { transport: "smtp", nexthop: "other.test" },
    },
  ])("$name", ({ addr, tenant, want }) => {
    expect(resolveRecipient(addr, tenant, routing, defaults)).toEqual(want);
  });

  it("sends unrouted mail to the smarthost when one is configured", () => {
    expect(
      resolveRecipient("a@other.test", "x", routing, { transport: "smtp", smarthost: "[smarthost.test]:587" }),
    ).toEqual({ transport: "smtp", nexthop: "[smarthost.test]:587" });
  });

  it('sends an address literal to the mx kind (its own host, no DNS), never as the relay kind\'s "[host]" with its credentials', () => {
    const r = resolveRecipient("postmaster@[93.184.216.34]", "x", routing, defaults);
    expect(r).toEqual({ transport: "smtp", nexthop: "literal:[93.184.216.34]" });
    expect(relayTarget(r.nexthop)).toBeNull();
    const step = startMxLookup({ domain: r.nexthop }, 0, createMxConfig());
    expect(step).toMatchObject({
      kind: "done",
      result: { kind: "hosts", hosts: [{ host: "93.184.216.34", preference: 0 }], implicit: true },
    });
    expect(resolveRecipient("a@[IPv6:2606:4700::ab]", "x", routing, defaults).nexthop).toBe(
      "literal:[IPv6:2606:4700::ab]",
    );
  });
});
