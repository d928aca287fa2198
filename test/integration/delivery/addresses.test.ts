/**
 * Valid addresses the relay used to refuse at accept (issue 37, item 6), sent to the smtp-server
 * sink: a UTF-8 local part (RFC 6531) toward a server that offers SMTPUTF8 is delivered, in RCPT
 * TO and the To field as given; a quoted local part (`"a..b"@`, valid only quoted, RFC 5321
 * §4.1.2) is accepted and goes out in RCPT TO as given. smtp-server itself takes no quoted local
 * part (it answers 501 5.1.3 to any), so that recipient bounces with smtp-server's own reply: what
 * is shown is that the relay accepts and sends the address; address literals are covered by
 * test/unit/classify/resolve.test.ts.
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, inject, it } from "vitest";
import { email, newKey } from "../helpers";
import { recipientsWhen } from "./observe";
import { arrival, send } from "./inbound-kit";

const sink = inject("sink");
let key: string;

beforeAll(async () => {
  key = await newKey("addresses");
  await env.DB.batch([
    env.DB.prepare("INSERT OR IGNORE INTO transports (name, nexthop) VALUES ('sink', ?)").bind(
      `[127.0.0.1]:${sink.smtpPort}`,
    ),
    env.DB.prepare("INSERT OR IGNORE INTO routes (tenant_id, pattern, transport) VALUES (NULL, 'sink.test', 'sink')"),
  ]);
});

describe("addresses RFC 5321 and RFC 6531 allow", () => {
  it("accepts a quoted local part and a UTF-8 one, and delivers the UTF-8 one over SMTPUTF8 as given", async () => {
    const to = ['"a..b"@sink.test', "josé@sink.test"];
    const id = await send(key, email({ to, subject: "addresses" }), null);
    const m = await arrival("josé@sink.test");
    expect(m.rcptTo).toEqual(["josé@sink.test"]);
    const text = new TextDecoder().decode(Uint8Array.from(atob(m.body), (c) => c.charCodeAt(0)));
    expect(text).toMatch(/^To: "a\.\.b"@sink\.test, josé@sink\.test\r$/m);
    const rs = await recipientsWhen(key, id, (r) => r.status === "delivered" || r.status === "bounced", "outcomes");
    expect(rs.map((r) => [r.email, r.status])).toEqual([
      ['"a..b"@sink.test', "bounced"],
      ["josé@sink.test", "delivered"],
    ]);
    // smtp-server's refusal of the quoted form itself (the relay sent it: nothing refused it before).
    expect(rs[0]!.last_response).toMatchObject({ code: 501, enhanced: "5.1.3", mx: "127.0.0.1" });
  });
});
