// resolveAddress (worker/net/mx.ts): the address an MX host is connected to, so the delivery
// report can name it (Halon's remoteip policy field).
import { describe, expect, it } from "vitest";
import { resolveAddress } from "../../../worker/net/mx";

/** A fake DoH resolver answering from a table of name/type → JSON. */
function resolver(table: Record<string, unknown>) {
  const asked: string[] = [];
  const fetch = async (input: RequestInfo | URL) => {
    const url = new URL(String(input));
    const key = `${url.searchParams.get("name")}/${url.searchParams.get("type")}`;
    asked.push(key);
    const body = table[key] ?? { Status: 3 };
    return new Response(JSON.stringify(body), { headers: { "content-type": "application/dns-json" } });
  };
  return { fetch: fetch as typeof globalThis.fetch, asked };
}

describe("resolveAddress", () => {
  it("takes an IP literal as it is, without a query", async () => {
    const r = resolver({});
    expect(await resolveAddress("192.0.2.7", { fetch: r.fetch })).toBe("192.0.2.7");
    expect(await resolveAddress("[2001:db8::1]", { fetch: r.fetch })).toBe("2001:db8::1");
    expect(r.asked).toEqual([]);
  });

  it("gives the first A record, through a CNAME", async () => {
    const r = resolver({
      "mx.example.com/A": {
        Status: 0,
        Answer: [
          { name: "mx.example.com.", type: 5, TTL: 60, data: "edge.example.net." },
          { name: "edge.example.net.", type: 1, TTL: 60, data: "198.51.100.9" },
          { name: "edge.example.net.", type: 1, TTL: 60, data: "198.51.100.10" },
        ],
      },
    });
    expect(await resolveAddress("mx.example.com.", { fetch: r.fetch })).toBe("198.51.100.9");
  });

  it("is null for a name without an address, or when the resolver fails", async () => {
    expect(await resolveAddress("nx.example.com", { fetch: resolver({}).fetch })).toBeNull();
    expect(
      await resolveAddress("mx.example.com", {
        fetch: (async () => new Response("no", { status: 500 })) as typeof fetch,
      }),
    ).toBeNull();
  });
});
