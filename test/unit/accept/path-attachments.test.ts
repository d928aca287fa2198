import { afterEach, describe, expect, it } from "vitest";
import { fetchPathAttachments } from "../../../worker/accept/path-attachments";
import { clearResolvedCache } from "../../../worker/net/fetch-guard";

const production = { COHORT_ENV: "production", DOH_RESOLVER_URL: "https://doh.test/dns-query" };
const PDF = new Uint8Array([0x25, 0x50, 0x44, 0x46, 0x2d, 1, 2, 3]);

/** A fetch that answers DoH queries from `dns` and file requests from `files`. */
function net(dns: Record<string, string[]>, files: Record<string, () => Response>) {
  const fetched: string[] = [];
  const fetchFn = (async (input: RequestInfo | URL) => {
    const url = new URL(String(input));
    if (url.hostname === "doh.test") {
      const name = url.searchParams.get("name")!;
      const type = url.searchParams.get("type");
      const data = type === "A" ? (dns[name] ?? []) : [];
      return Response.json({
        Status: dns[name] ? 0 : 3,
        Answer: data.map((d) => ({ name: `${name}.`, type: 1, TTL: 60, data: d })),
      });
    }
    fetched.push(url.href);
    const f = files[url.href];
    return f ? f() : new Response("no", { status: 404 });
  }) as typeof fetch;
  return { fetch: fetchFn, fetched };
}

afterEach(() => clearResolvedCache());

describe("attachments given by path", () => {
  it("fetches the file: bytes, the response's content type, the URL's file name", async () => {
    const n = net(
      { "files.example.com": ["93.184.216.34"] },
      {
        "https://files.example.com/docs/Report%202026.pdf": () =>
          new Response(PDF, { headers: { "content-type": "application/pdf; name=x" } }),
      },
    );
    const [a, b] = (await fetchPathAttachments(
      production,
      [{ path: "https://files.example.com/docs/Report%202026.pdf" }, { content: "aGk=", filename: "hi.txt" }],
      1000,
      { fetch: n.fetch },
    ))!;
    expect(a).toMatchObject({ filename: "Report 2026.pdf", content_type: "application/pdf" });
    expect(a!.content).toEqual(PDF);
    expect(b).toEqual({ content: "aGk=", filename: "hi.txt" });
  });

  it("keeps a given filename and content_type", async () => {
    const n = net(
      { "files.example.com": ["93.184.216.34"] },
      { "https://files.example.com/x": () => new Response(PDF, { headers: { "content-type": "text/plain" } }) },
    );
    const [a] = (await fetchPathAttachments(
      production,
      [{ path: "https://files.example.com/x", filename: "a.pdf", content_type: "application/pdf" }],
      1000,
      { fetch: n.fetch },
    ))!;
    expect(a).toMatchObject({ filename: "a.pdf", content_type: "application/pdf" });
  });

  it.each([
    [
      "plain http in production",
      "http://files.example.com/x",
      { "files.example.com": ["93.184.216.34"] },
      /refused.*scheme/,
    ],
    ["a private address literal", "https://10.0.0.5/x", {}, /refused/],
    ["the metadata name", "https://metadata.google.internal/x", {}, /refused/],
    [
      "a name that resolves to loopback",
      "https://sneaky.example.com/x",
      { "sneaky.example.com": ["127.0.0.1"] },
      /refused.*127\.0\.0\.1/,
    ],
    ["a name that does not resolve", "https://nowhere.example.com/x", {}, /refused.*no address|refused.*resolve/],
  ])("refuses %s with 422 invalid_attachment, fetching nothing", async (_, path, dns, message) => {
    const n = net(dns, {});
    const err = await fetchPathAttachments(production, [{ path }], 1000, { fetch: n.fetch }).catch((e: unknown) => e);
    expect(err).toMatchObject({
      statusCode: 422,
      errorName: "invalid_attachment",
      message: expect.stringMatching(message),
    });
    expect(n.fetched).toEqual([]);
  });

  it.each([
    ["a 404", () => new Response("gone", { status: 404 }), /HTTP 404/],
    [
      "a redirect (not followed)",
      () => new Response(null, { status: 302, headers: { location: "https://10.0.0.1/" } }),
      /redirect/,
    ],
    [
      "a declared size over the limit",
      () => new Response(new Uint8Array(2000), { headers: { "content-length": "2000" } }),
      /larger than the 1000 bytes/,
    ],
    [
      "a streamed size over the limit",
      () =>
        new Response(
          new ReadableStream({
            start(c) {
              c.enqueue(new Uint8Array(600));
              c.enqueue(new Uint8Array(600));
              c.close();
            },
          }),
        ),
      /larger than/,
    ],
  ])("refuses %s", async (_, answer, message) => {
    const n = net({ "files.example.com": ["93.184.216.34"] }, { "https://files.example.com/x": answer });
    const err = await fetchPathAttachments(production, [{ path: "https://files.example.com/x" }], 1000, {
      fetch: n.fetch,
    }).catch((e: unknown) => e);
    expect(err).toMatchObject({
      statusCode: 422,
      errorName: "invalid_attachment",
      message: expect.stringMatching(message),
    });
  });

  it("counts every fetched file against one message limit", async () => {
    const n = net(
      { "files.example.com": ["93.184.216.34"] },
      { "https://files.example.com/x": () => new Response(new Uint8Array(600)) },
    );
    const err = await fetchPathAttachments(
      production,
      [{ path: "https://files.example.com/x" }, { path: "https://files.example.com/x" }],
      1000,
      { fetch: n.fetch },
    ).catch((e: unknown) => e);
    expect(err).toMatchObject({ message: expect.stringMatching(/attachments\[1\]\.path.*larger/) });
  });

  describe("in development", () => {
    const dev = {
      COHORT_ENV: "development",
      DOH_RESOLVER_URL: "https://doh.test/dns-query",
      DEV_PATH_ORIGINS: "http://127.0.0.1:2600, http://127.0.0.1:2700",
    };

    it("reaches an origin the local stack declares, as it is", async () => {
      const n = net({}, { "http://127.0.0.1:2600/files/a.pdf": () => new Response(PDF) });
      const [a] = (await fetchPathAttachments(dev, [{ path: "http://127.0.0.1:2600/files/a.pdf" }], 1000, {
        fetch: n.fetch,
      }))!;
      expect(a!.content).toEqual(PDF);
    });

    it.each([
      ["another loopback port (the SMTP catcher's listing)", "http://127.0.0.1:2601/messages", {}],
      ["a declared port under another name", "http://localhost:2600/files/a.pdf", {}],
      ["a private address", "http://10.0.0.5:2600/x", {}],
      ["a name that resolves to loopback", "https://sneaky.example.com/x", { "sneaky.example.com": ["127.0.0.1"] }],
    ])("refuses %s, fetching nothing", async (_, path, dns) => {
      const n = net(dns, {});
      const err = await fetchPathAttachments(dev, [{ path }], 1000, { fetch: n.fetch }).catch((e: unknown) => e);
      expect(err).toMatchObject({
        statusCode: 422,
        errorName: "invalid_attachment",
        message: expect.stringMatching(/refused/),
      });
      expect(n.fetched).toEqual([]);
    });

    it("still fetches a public https URL, checked as in production", async () => {
      const n = net(
        { "files.example.com": ["93.184.216.34"] },
        { "https://files.example.com/x": () => new Response(PDF) },
      );
      const [a] = (await fetchPathAttachments(dev, [{ path: "https://files.example.com/x" }], 1000, {
        fetch: n.fetch,
      }))!;
      expect(a!.content).toEqual(PDF);
    });
  });
});
