import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { createDotStuffer, finishDotStuffing, stuffChunk } from "../../../worker/smtp/core/dot-stuff";

/** Runs the encoder over chunks and returns the whole DATA stream as latin1 text. */
function stuff(chunks: Uint8Array[]): string {
  let state = createDotStuffer();
  const parts: Uint8Array[] = [];
  for (const chunk of chunks) {
    const out = stuffChunk(state, chunk);
    state = out.state;
    parts.push(out.bytes);
  }
  parts.push(finishDotStuffing(state));
  return Buffer.concat(parts).toString("latin1");
}

const latin1 = (s: string) => new Uint8Array(Buffer.from(s, "latin1"));

/** What the receiving side does (RFC 5321 §4.5.2): strip the terminator and one leading dot per line. */
function unstuff(wire: string): string {
  expect(wire === ".\r\n" || wire.endsWith("\r\n.\r\n")).toBe(true);
  const body = wire === ".\r\n" ? "" : wire.slice(0, -3);
  return body
    .split("\r\n")
    .map((line) => (line.startsWith(".") ? line.slice(1) : line))
    .join("\r\n");
}

/** The input with every line break made CRLF and a final CRLF ensured (what the server stores). */
function normalise(body: string): string {
  const crlf = body.replace(/\r\n|\r|\n/g, "\r\n");
  return crlf === "" || crlf.endsWith("\r\n") ? crlf : `${crlf}\r\n`;
}

/** Cuts bytes at the given positions. */
function cut(bytes: Uint8Array, positions: number[]): Uint8Array[] {
  const points = [...new Set(positions.map((p) => p % (bytes.length + 1)))].sort((a, b) => a - b);
  const chunks: Uint8Array[] = [];
  let start = 0;
  for (const p of points) {
    chunks.push(bytes.subarray(start, p));
    start = p;
  }
  chunks.push(bytes.subarray(start));
  return chunks;
}

describe("dot-stuffing encoder", () => {
  it.each([
    { name: "empty body", body: "", want: ".\r\n" },
    { name: "one line with CRLF", body: "hello\r\n", want: "hello\r\n.\r\n" },
    { name: "no final line break", body: "hello", want: "hello\r\n.\r\n" },
    { name: "leading dot", body: ".hidden\r\n", want: "..hidden\r\n.\r\n" },
    { name: "lone dot line", body: "a\r\n.\r\nb\r\n", want: "a\r\n..\r\nb\r\n.\r\n" },
    { name: "dot not at line start", body: "a.b\r\n", want: "a.b\r\n.\r\n" },
    { name: "bare LF", body: "a\nb\n", want: "a\r\nb\r\n.\r\n" },
    { name: "bare CR", body: "a\rb", want: "a\r\nb\r\n.\r\n" },
    { name: "LF then dot", body: "a\n.\n", want: "a\r\n..\r\n.\r\n" },
    {
      name: "smuggling attempt \\n.\\r\\n",
      body: "a\n.\r\nMAIL FROM:<x>\r\n",
      want: "a\r\n..\r\nMAIL FROM:<x>\r\n.\r\n",
    },
    { name: "smuggling attempt \\r.\\r", body: "a\r.\rRSET", want: "a\r\n..\r\nRSET\r\n.\r\n" },
    { name: "CR CR LF", body: "a\r\r\nb", want: "a\r\n\r\nb\r\n.\r\n" },
    { name: "only dots", body: "...", want: "....\r\n.\r\n" },
    { name: "ends with CR", body: "a\r", want: "a\r\n.\r\n" },
  ])("encodes $name", ({ body, want }) => {
    expect(stuff([latin1(body)])).toBe(want);
  });

  it("gives the same bytes for every single split position", () => {
    const body = latin1("a\r\n.b\r\n\r\n.\r\nc\n.d\r.e\r\n..f");
    const whole = stuff([body]);
    for (let i = 0; i <= body.length; i++) {
      expect(stuff([body.subarray(0, i), body.subarray(i)]), `split at ${i}`).toBe(whole);
    }
    expect(stuff(Array.from(body, (b) => Uint8Array.of(b)))).toBe(whole);
  });

  it("passes 8-bit bytes through unchanged", () => {
    const body = new Uint8Array([0xc3, 0xa9, 0x2e, 0x0a, 0x2e, 0xff, 0x00]);
    expect(Buffer.from(stuff([body]), "latin1")).toEqual(
      Buffer.from([0xc3, 0xa9, 0x2e, 0x0d, 0x0a, 0x2e, 0x2e, 0xff, 0x00, 0x0d, 0x0a, 0x2e, 0x0d, 0x0a]),
    );
  });

  // Bodies drawn mostly from the bytes that matter, plus arbitrary bytes.
  const interesting = fc.constantFrom(0x2e, 0x0d, 0x0a, 0x61, 0x20, 0xe9);
  const bodyArb = fc.oneof(
    fc.array(interesting, { maxLength: 300 }).map((a) => Uint8Array.from(a)),
    fc.uint8Array({ maxLength: 300 }),
  );

  it("round-trips: unstuffed output equals the CRLF-normalised input, for any chunking", () => {
    fc.assert(
      fc.property(bodyArb, fc.array(fc.nat(), { maxLength: 20 }), (body, cuts) => {
        const wire = stuff(cut(body, cuts));
        expect(unstuff(wire)).toBe(normalise(Buffer.from(body).toString("latin1")));
      }),
      { numRuns: 2000 },
    );
  });

  it("never ends the data early and never emits a bare CR or LF", () => {
    fc.assert(
      fc.property(bodyArb, fc.array(fc.nat(), { maxLength: 20 }), (body, cuts) => {
        const wire = stuff(cut(body, cuts));
        const firstEnd = wire.startsWith(".\r\n") ? 0 : wire.indexOf("\r\n.\r\n") + 2;
        expect(firstEnd).toBe(wire.length - 3);
        expect(/\r(?!\n)|(?<!\r)\n/.test(wire)).toBe(false);
      }),
      { numRuns: 2000 },
    );
  });

  it("does not depend on chunking at all", () => {
    fc.assert(
      fc.property(bodyArb, fc.array(fc.nat(), { maxLength: 20 }), (body, cuts) => {
        expect(stuff(cut(body, cuts))).toBe(stuff([body]));
      }),
      { numRuns: 1000 },
    );
  });
});
