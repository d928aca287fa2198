/*
 * NAME
 *   dot-stuff - streaming DATA encoder: line-end normalisation and dot-stuffing
 *
 * SUMMARY
 *   Turns a message body, fed in chunks that may split anywhere, into the byte
 *   stream sent after "354": every line ends in CRLF, a "." that starts a line
 *   is doubled (RFC 5321 §4.5.2), and the "<CRLF>.<CRLF>" terminator follows.
 *
 * DESCRIPTION
 *   createDotStuffer() returns the encoder state for a new body.
 *
 *   stuffChunk(state, chunk) returns the new state and the encoded bytes for
 *   this chunk. Nothing is held back: a CR at the end of a chunk is written as
 *   CRLF at once, and an LF that opens the next chunk is then dropped.
 *
 *   finishDotStuffing(state) returns the bytes that end the body: CRLF if the
 *   body did not end with a line break, then ".\r\n".
 *
 * INVARIANTS
 *   - CRLF, bare LF and bare CR in the input each become one CRLF. Bare CR is
 *     normalised too, so the output has no "\r.\r" or "\n.\n" smuggling forms.
 *   - The output has no CR or LF that is not part of a CRLF pair, and it
 *     contains "\r\n.\r\n" only as its final five bytes (an empty body is just
 *     ".\r\n").
 *   - Removing one leading "." from each line and the final "." line gives the
 *     CRLF-normalised input back, whatever the chunking.
 *
 * ERRORS
 *   None.
 */

const CR = 0x0d;
const LF = 0x0a;
const DOT = 0x2e;

/** Encoder state between chunks. */
export interface DotStuffer {
  /** The next input byte starts a line. */
  atLineStart: boolean;
  /** The last input byte was CR (already written as CRLF): drop an LF that follows. */
  afterCr: boolean;
}

/** Result of encoding one chunk. */
export interface StuffedChunk {
  state: DotStuffer;
  bytes: Uint8Array;
}

/** Returns the encoder state for a new body. */
export function createDotStuffer(): DotStuffer {
  return { atLineStart: true, afterCr: false };
}

/** Encodes one body chunk; see the header for the guarantees. */
export function stuffChunk(state: DotStuffer, chunk: Uint8Array): StuffedChunk {
  // Worst case every byte is a line break (1 -> 2 bytes) or a leading dot (1 -> 2).
  const out = new Uint8Array(chunk.length * 2);
  let n = 0;
  let { atLineStart, afterCr } = state;
  for (const b of chunk) {
    if (b === LF && afterCr) {
      afterCr = false;
      continue;
    }
    afterCr = false;
    if (b === CR || b === LF) {
      out[n++] = CR;
      out[n++] = LF;
      atLineStart = true;
      afterCr = b === CR;
      continue;
    }
    if (atLineStart && b === DOT) out[n++] = DOT;
    out[n++] = b;
    atLineStart = false;
  }
  return { state: { atLineStart, afterCr }, bytes: out.subarray(0, n) };
}

/** Returns the bytes that end the DATA stream (CRLF if needed, then ".\r\n"). */
export function finishDotStuffing(state: DotStuffer): Uint8Array {
  return state.atLineStart ? Uint8Array.of(DOT, CR, LF) : Uint8Array.of(CR, LF, DOT, CR, LF);
}
