// The kept-open session (Postfix's connection cache): idle after the last message, RSET to check
// the cached connection before more, QUIT on close; a failed check is reported as staleCache.
import { describe, expect, it } from "vitest";
import { createSessionConfig } from "../../../worker/smtp/core/config";
import { isInvariantError } from "../../../worker/smtp/core/errors";
import { closeIdleSession, resumeSession, startSession } from "../../../worker/smtp/core/session";
import { envelope, runScripted, runScriptedCached } from "./scripted-server";

const m = (id: string, rcpt = `${id}@x.test`) => envelope({ id, rcptTo: [rcpt] });

describe("a kept-open session", () => {
  it("carries three batches over one connection: idle between them, RSET before each resumed one, QUIT at the close", () => {
    const run = runScriptedCached({}, [[m("a")], [m("b"), m("c")], [m("d")]], {});
    expect(run.actions.filter((a) => a.kind === "connect")).toHaveLength(1);
    expect(run.actions.filter((a) => a.kind === "idle")).toHaveLength(3);
    expect(run.sends).toEqual([
      "EHLO client.test\r\n",
      "MAIL FROM:<sender@example.org>\r\n",
      "RCPT TO:<a@x.test>\r\n",
      "DATA\r\n",
      "RSET\r\n",
      "MAIL FROM:<sender@example.org>\r\n",
      "RCPT TO:<b@x.test>\r\n",
      "DATA\r\n",
      "RSET\r\n",
      "MAIL FROM:<sender@example.org>\r\n",
      "RCPT TO:<c@x.test>\r\n",
      "DATA\r\n",
      "RSET\r\n",
      "MAIL FROM:<sender@example.org>\r\n",
      "RCPT TO:<d@x.test>\r\n",
      "DATA\r\n",
      "QUIT\r\n",
    ]);
    expect(run.batches.map((b) => b.map((t) => [t.messageId, t.recipients[0]!.status]))).toEqual([
      [["a", "delivered"]],
      [
        ["b", "delivered"],
        ["c", "delivered"],
      ],
      [["d", "delivered"]],
    ]);
    expect(run.outcome.transactions.map((t) => t.messageId)).toEqual(["a", "b", "c", "d"]);
    expect(run.outcome.staleCache).toBeUndefined();
    expect(run.outcome.siteFailure).toBeNull();
  });

  const staleCacheTitle =
    "a cached connection the server dropped fails its RSET check: the resumed messages are " +
    "deferred as staleCache, nothing of them was sent, no site failure";
  it(staleCacheTitle, () => {
    const run = runScriptedCached({}, [[m("a")], [m("b")]], { RSET: { drop: "connection reset" } });
    expect(run.sends.slice(-1)).toEqual(["RSET\r\n"]);
    expect(run.outcome.staleCache).toBe(true);
    expect(run.outcome.siteFailure).toBeNull();
    expect(run.batches[1]!.map((t) => t.recipients[0]!.status)).toEqual(["deferred"]);
    expect(run.batches[0]!.map((t) => t.recipients[0]!.status)).toEqual(["delivered"]);
  });

  it("a 421 to the RSET check (the server timed the idle connection out) is staleCache too", () => {
    const run = runScriptedCached({}, [[m("a")], [m("b")]], { RSET: "421 4.4.2 idle timeout" });
    expect(run.outcome.staleCache).toBe(true);
    expect(run.outcome.siteFailure).toBeNull();
  });

  it("a failure after the RSET check passed is an ordinary failure, not staleCache", () => {
    const run = runScriptedCached({}, [[m("a")], [m("b")]], { MAIL: ["250 2.1.0 ok", { drop: "reset" }] });
    expect(run.sends.slice(-2)).toEqual(["RSET\r\n", "MAIL FROM:<sender@example.org>\r\n"]);
    expect(run.outcome.staleCache).toBeUndefined();
    expect(run.batches[1]![0]!.recipients[0]!.status).toBe("deferred");
  });

  it("a resumed batch refused before sending (bad sender) is decided without a word to the server and the session idles again", () => {
    const bad = envelope({ id: "b", mailFrom: "a<b@x.test", rcptTo: ["b@x.test"] });
    const run = runScriptedCached({}, [[m("a")], [bad], [m("c")]], {});
    expect(run.batches[1]![0]!.recipients[0]).toMatchObject({ status: "bounced", source: "local" });
    expect(run.sends.filter((x) => x === "RSET\r\n")).toHaveLength(1);
    expect(run.batches[2]![0]!.recipients[0]!.status).toBe("delivered");
  });

  it("without keepOpen a session QUITs after its last message as before and never idles", () => {
    const run = runScripted({}, [m("a")], {});
    expect(run.actions.some((a) => a.kind === "idle")).toBe(false);
    expect(run.sends.at(-1)).toBe("QUIT\r\n");
  });

  it("resume and close are only for an idle session, and message ids stay unique across batches", () => {
    const cfg = createSessionConfig({ heloName: "client.test", remoteHost: "mx.test" });
    const started = startSession(cfg, [m("a")], { keepOpen: true });
    expect(() => resumeSession(started.state, [m("b")], cfg)).toThrow(/resume in phase connecting/);
    expect(() => closeIdleSession(started.state, cfg)).toThrow(/close in phase connecting/);
    const run = runScriptedCached({}, [[m("a")]], {});
    const idle = { ...run.state, phase: "idle" as const, outcome: null, wait: null };
    try {
      resumeSession(idle, [m("a")], cfg);
      expect.unreachable();
    } catch (e) {
      expect(isInvariantError(e)).toBe(true);
    }
  });
});
