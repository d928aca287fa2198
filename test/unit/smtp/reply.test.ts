import { describe, expect, it } from "vitest";
import {
  classifyReply,
  createReplyParser,
  deriveEnhancedCode,
  feedReplyParser,
  formatReply,
  hasBufferedInput,
  MAX_REPLY_LINE_BYTES,
  parseEnhancedCode,
  type ReplyProtocolError,
  type SmtpReply,
} from "../../../worker/smtp/core/reply";

/** Feeds all chunks and collects every reply and the first error. */
function parseChunks(chunks: (string | Uint8Array)[]): { replies: SmtpReply[]; error: ReplyProtocolError | null } {
  let parser = createReplyParser();
  const replies: SmtpReply[] = [];
  let error: ReplyProtocolError | null = null;
  for (const chunk of chunks) {
    const fed = feedReplyParser(parser, chunk);
    parser = fed.parser;
    replies.push(...fed.replies);
    error ??= fed.error;
  }
  return { replies, error };
}

const bytes = (s: string) => new Uint8Array(Buffer.from(s, "utf8"));

describe("reply parser: valid replies", () => {
  it.each([
    {
      name: "single line",
      input: "220 mx.example ESMTP ready\r\n",
      want: [{ code: 220, lines: ["mx.example ESMTP ready"], text: "mx.example ESMTP ready" }],
    },
    {
      name: "multiline EHLO",
      input: "250-mx.example\r\n250-PIPELINING\r\n250 SIZE 1000\r\n",
      want: [{ code: 250, lines: ["mx.example", "PIPELINING", "SIZE 1000"], text: "mx.example PIPELINING SIZE 1000" }],
    },
    {
      name: "enhanced code on every line",
      input: "550-5.1.1 The email account\r\n550 5.1.1 does not exist\r\n",
      want: [
        {
          code: 550,
          enhanced: "5.1.1",
          lines: ["5.1.1 The email account", "5.1.1 does not exist"],
          text: "The email account does not exist",
        },
      ],
    },
    { name: "bare code", input: "250\r\n", want: [{ code: 250, lines: [""], text: "" }] },
    { name: "bare LF line ends", input: "250-a\n250 b\n", want: [{ code: 250, lines: ["a", "b"], text: "a b" }] },
    {
      name: "two replies in one chunk (pipelining)",
      input: "250 2.1.0 ok\r\n354 go ahead\r\n",
      want: [
        { code: 250, enhanced: "2.1.0", lines: ["2.1.0 ok"], text: "ok" },
        { code: 354, lines: ["go ahead"], text: "go ahead" },
      ],
    },
    {
      name: "UTF-8 text",
      input: "550 адрес не найден\r\n",
      want: [{ code: 550, lines: ["адрес не найден"], text: "адрес не найден" }],
    },
    { name: "incomplete reply is held", input: "250-first\r\n250 sec", want: [] },
  ])("parses $name", ({ input, want }) => {
    expect(parseChunks([input])).toEqual({ replies: want, error: null });
  });

  it("gives the same replies for a split at every byte position, and byte by byte", () => {
    const input = bytes(
      "220 mx ready\r\n250-mx\r\n250-8BITMIME\r\n250 SMTPUTF8\r\n550 5.1.1 ünknown ☃\r\n452 4.5.3 too many\r\n",
    );
    const whole = parseChunks([input]);
    expect(whole.replies).toHaveLength(4);
    expect(whole.error).toBeNull();
    for (let i = 0; i <= input.length; i++) {
      expect(parseChunks([input.subarray(0, i), input.subarray(i)]), `split at ${i}`).toEqual(whole);
    }
    const single = Array.from(input, (b) => Uint8Array.of(b));
    expect(parseChunks(single)).toEqual(whole);
  });

  it("splits between CR and LF without inventing an empty line", () => {
    expect(parseChunks(["250 ok\r", "\n250 two\r", "\n"]).replies.map((r) => r.text)).toEqual(["ok", "two"]);
  });

  it("reports buffered input until a reply completes", () => {
    let parser = createReplyParser();
    expect(hasBufferedInput(parser)).toBe(false);
    parser = feedReplyParser(parser, "250-a\r\n").parser;
    expect(hasBufferedInput(parser)).toBe(true);
    parser = feedReplyParser(parser, "250 b\r\n").parser;
    expect(hasBufferedInput(parser)).toBe(false);
    parser = feedReplyParser(parser, "2").parser;
    expect(hasBufferedInput(parser)).toBe(true);
  });

  it("never mutates the parser it was given", () => {
    const p0 = createReplyParser();
    const p1 = feedReplyParser(p0, "250-a\r\n250").parser;
    const snapshot = JSON.stringify({ ...p1, pending: [...p1.pending] });
    feedReplyParser(p1, " b\r\n");
    expect(JSON.stringify({ ...p1, pending: [...p1.pending] })).toBe(snapshot);
    expect(p0).toEqual(createReplyParser());
  });
});

describe("reply parser: invalid input", () => {
  it.each([
    { name: "non-digit code", input: "25O ok\r\n", reason: "bad-line" },
    { name: "letters only", input: "hello\r\n", reason: "bad-line" },
    { name: "short code", input: "25\r\n", reason: "bad-line" },
    { name: "bad separator", input: "250x ok\r\n", reason: "bad-line" },
    { name: "code below 200", input: "199 what\r\n", reason: "bad-code" },
    { name: "code above 599", input: "600 what\r\n", reason: "bad-code" },
    { name: "code 099", input: "099 what\r\n", reason: "bad-code" },
    { name: "mismatched multiline codes", input: "250-a\r\n251 b\r\n", reason: "code-mismatch" },
    { name: "over-long complete line", input: `250 ${"x".repeat(MAX_REPLY_LINE_BYTES)}\r\n`, reason: "line-too-long" },
    {
      name: "over-long unterminated line",
      input: `250 ${"x".repeat(MAX_REPLY_LINE_BYTES + 10)}`,
      reason: "line-too-long",
    },
    { name: "too many lines", input: `${"250-x\r\n".repeat(1001)}250 end\r\n`, reason: "too-many-lines" },
  ])("rejects $name", ({ input, reason }) => {
    const got = parseChunks([input]);
    expect(got.error?.reason).toBe(reason);
    expect(got.error?.kind).toBe("protocol-error");
    expect(got.replies).toEqual([]);
  });

  it("accepts a line of exactly the maximum length", () => {
    const line = `250 ${"x".repeat(MAX_REPLY_LINE_BYTES - 4)}\r\n`;
    expect(parseChunks([line]).error).toBeNull();
  });

  it("keeps replies completed before the bad line, then stays failed", () => {
    let parser = createReplyParser();
    const fed = feedReplyParser(parser, "250 ok\r\nnonsense\r\n");
    expect(fed.replies.map((r) => r.code)).toEqual([250]);
    expect(fed.error?.reason).toBe("bad-line");
    parser = fed.parser;
    const later = feedReplyParser(parser, "250 fine\r\n");
    expect(later.replies).toEqual([]);
    expect(later.error).toEqual(fed.error);
  });

  it("quotes the offending line without control characters", () => {
    expect(parseChunks(["2\x0050 x\r\n"]).error?.text).toBe('invalid SMTP reply (bad-line): "2?50 x"');
  });
});

describe("enhanced status codes", () => {
  it.each([
    { name: "plain", text: "5.1.1 User unknown", code: 550, want: { enhanced: "5.1.1", rest: "User unknown" } },
    {
      name: "three-digit parts",
      text: "4.7.650 rate limited",
      code: 451,
      want: { enhanced: "4.7.650", rest: "rate limited" },
    },
    { name: "success", text: "2.0.0 Ok: queued", code: 250, want: { enhanced: "2.0.0", rest: "Ok: queued" } },
    { name: "alone", text: "2.1.0", code: 250, want: { enhanced: "2.1.0", rest: "" } },
    { name: "tab separator", text: "5.7.1\tdenied", code: 554, want: { enhanced: "5.7.1", rest: "denied" } },
    { name: "leading zeros normalised", text: "5.01.001 x", code: 550, want: { enhanced: "5.1.1", rest: "x" } },
    { name: "class differs from code", text: "4.1.1 nope", code: 550, want: { rest: "4.1.1 nope" } },
    { name: "class 3 is not a status", text: "3.0.0 go", code: 354, want: { rest: "3.0.0 go" } },
    { name: "glued to text", text: "5.1.1User", code: 550, want: { rest: "5.1.1User" } },
    { name: "four-digit part", text: "5.1111.1 x", code: 550, want: { rest: "5.1111.1 x" } },
    { name: "not at start", text: "User 5.1.1", code: 550, want: { rest: "User 5.1.1" } },
  ])("extracts $name", ({ text, code, want }) => {
    expect(parseEnhancedCode(text, code)).toEqual(want);
  });

  it("takes the reply's enhanced code from its first line only", () => {
    const { replies } = parseChunks(["250-mx greets you\r\n250 2.0.0 ok\r\n"]);
    expect(replies[0]?.enhanced).toBeUndefined();
  });
});

describe("reply classification", () => {
  it.each([
    { code: 220, want: "ok" },
    { code: 250, want: "ok" },
    { code: 334, want: "intermediate" },
    { code: 354, want: "intermediate" },
    { code: 421, want: "transient" },
    { code: 452, want: "transient" },
    { code: 500, want: "permanent" },
    { code: 554, want: "permanent" },
  ])("classifies $code as $want", ({ code, want }) => {
    expect(classifyReply(code)).toBe(want);
  });

  it("formats replies and default statuses", () => {
    expect(formatReply({ code: 550, enhanced: "5.1.1", lines: ["5.1.1 no"], text: "no" })).toBe("550 5.1.1 no");
    expect(formatReply({ code: 250, lines: [""], text: "" })).toBe("250");
    expect(deriveEnhancedCode(451)).toBe("4.0.0");
    expect(deriveEnhancedCode(554)).toBe("5.0.0");
  });
});
