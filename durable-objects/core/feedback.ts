/*
 * NAME
 *   feedback - concurrency feedback curves (after Postfix qmgr_feedback.c)
 * DESCRIPTION
 *   parseFeedback() turns a feedback setting into a curve: "x" (constant), "x/y" (constant
 *   x÷y), "x/concurrency" (x÷N) and "x/sqrt_concurrency" (x÷√N). feedbackValue() evaluates
 *   a curve at window N.
 *
 *   Two modes. "postfix" reproduces Postfix's code exactly: anything unparsable or outside
 *   [0, 1], and x/sqrt_concurrency (compiled out of Postfix), gives a warning and the
 *   constant 1 (spec §6.2, vector F13). "relay" is the relay's own (spec §12.1): it supports
 *   x/sqrt_concurrency and reports every bad value as an error, so configuration can be
 *   rejected instead of silently repaired.
 * INVARIANTS
 *   A curve's base is within [0, 1]; its value at any N ≥ 1 is within [0, 1].
 * ERRORS
 *   None thrown: the result says ok or not, with a message.
 */

/** How a feedback curve depends on the window N. */
export type FeedbackKind = "constant" | "concurrency" | "sqrt_concurrency";

/** A parsed feedback curve: value(N) = base, base/N or base/√N. */
export interface Feedback {
  kind: FeedbackKind;
  base: number;
  /** The setting as written, kept so configuration round-trips. */
  spec: string;
}

/** Result of parsing a feedback setting. */
export type FeedbackParse = { ok: true; feedback: Feedback; warning?: string } | { ok: false; error: string };

const NUMBER = /^\s*(\d+(?:\.\d*)?|\.\d+)\s*$/;

/** The constant curve 1, Postfix's default and its fallback for bad settings. */
export const FEEDBACK_ONE: Feedback = { kind: "constant", base: 1, spec: "1" };

/** Parses a feedback setting; see the module header for the two modes. */
export function parseFeedback(spec: string, mode: "postfix" | "relay"): FeedbackParse {
  const parsed = parseForm(spec);
  let problem: string | null = null;
  if (parsed === null) problem = `cannot parse feedback "${spec}"`;
  else if (!(parsed.base >= 0 && parsed.base <= 1)) problem = `feedback "${spec}" is outside the range [0, 1]`;
  else if (parsed.kind === "sqrt_concurrency" && mode === "postfix")
    problem = `feedback "${spec}": x/sqrt_concurrency is not supported by Postfix`;
  if (problem === null && parsed !== null) return { ok: true, feedback: { ...parsed, spec } };
  if (mode === "relay") return { ok: false, error: problem ?? `bad feedback "${spec}"` };
  return { ok: true, feedback: FEEDBACK_ONE, warning: `${problem}; using 1` };
}

function parseForm(spec: string): { kind: FeedbackKind; base: number } | null {
  const slash = spec.indexOf("/");
  if (slash < 0) {
    const x = toNumber(spec);
    return x === null ? null : { kind: "constant", base: x };
  }
  const x = toNumber(spec.slice(0, slash));
  const rest = spec.slice(slash + 1).trim();
  if (x === null) return null;
  if (rest === "concurrency") return { kind: "concurrency", base: x };
  if (rest === "sqrt_concurrency") return { kind: "sqrt_concurrency", base: x };
  const y = toNumber(rest);
  if (y === null || y === 0) return null;
  return { kind: "constant", base: x / y };
}

function toNumber(s: string): number | null {
  return NUMBER.test(s) ? Number(s) : null;
}

/** Evaluates a curve at window N (N ≥ 1). */
export function feedbackValue(fb: Feedback, windowN: number): number {
  switch (fb.kind) {
    case "constant":
      return fb.base;
    case "concurrency":
      return fb.base / windowN;
    case "sqrt_concurrency":
      return fb.base / Math.sqrt(windowN);
  }
}
