/*
 * NAME
 *   render - Resend's template variables: declarations, checks and rendering
 *
 * SUMMARY
 *   A stored template's subject, html and text name variables as `{{{KEY}}}` (Resend's
 *   form) or `{{KEY}}`; a send gives their values, and the declared fallback stands in
 *   for one it leaves out. Rendering happens once per message, at accept.
 *
 * DESCRIPTION
 *   TemplateContent      what one version of a template holds: subject, html, text, from,
 *                        reply_to and the variable declarations (key, type, fallback_value).
 *   usedVariables(c)     the keys the subject, html and text name, in order of first use.
 *   checkContent(c)      the problems of a version, first one first: a reserved or malformed
 *                        key (RESERVED_KEYS), a key declared twice, more than MAX_VARIABLES,
 *                        a fallback of the wrong type, a key used but not declared.
 *   checkValues(vars, values)  the problems of a send's values: an undeclared key, a value of
 *                        the wrong type (a number variable takes a number or a numeric
 *                        string), a required variable (no fallback) left out: it names the key.
 *   renderContent(c, values)  {subject, html, text}: each use replaced by the value (else the
 *                        fallback); in html the value is HTML-escaped (& < > " '), unless the
 *                        use is marked raw with `&` (`{{{&KEY}}}`, Mustache's marker); in the
 *                        subject and the text it is inserted as is. Null parts stay null.
 *
 * INVARIANTS
 *   Pure: no I/O, no clock. A use that is not a well-formed variable (`{{ a b }}`) is left as
 *   written. renderContent never reads a key that checkValues did not accept.
 *
 * ERRORS
 *   None thrown: checks return { field, message } problems for the caller to answer as 422.
 */

/** A variable declaration (Resend's shape). */
export interface VariableDecl {
  key: string;
  type: "string" | "number";
  fallback_value: string | number | null;
}

/** One version of a template. */
export interface TemplateContent {
  subject: string | null;
  html: string;
  text: string | null;
  from: string | null;
  reply_to: string[] | null;
  variables: VariableDecl[];
}

/** A problem with a template or a send's values. */
export interface Problem {
  /** "missing" for a required variable left out (Resend's missing_required_field), else "invalid". */
  kind: "missing" | "invalid";
  message: string;
}

/** Resend's reserved names: contact fields and the unsubscribe link. */
export const RESERVED_KEYS: readonly string[] = [
  "FIRST_NAME",
  "LAST_NAME",
  "EMAIL",
  "UNSUBSCRIBE_URL",
  "contact",
  "this",
];

/** Most variables a template may declare (Resend's limit). */
export const MAX_VARIABLES = 50;

const KEY_RE = /^[A-Za-z_][A-Za-z0-9_]{0,99}$/;
/** `{{{ &KEY }}}` or `{{ &KEY }}`: three braces or two, an optional raw marker, the key. */
const USE_RE = /\{\{\{\s*(&?)\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}\}|\{\{\s*(&?)\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g;

/** The keys the subject, html and text use, in order of first use. */
export function usedVariables(c: Pick<TemplateContent, "subject" | "html" | "text">): string[] {
  const seen = new Set<string>();
  for (const part of [c.subject, c.html, c.text]) {
    if (part === null) continue;
    for (const m of part.matchAll(USE_RE)) seen.add(m[2] ?? m[4]!);
  }
  return [...seen];
}

/** The problems of one version (see the header). */
export function checkContent(c: TemplateContent): Problem[] {
  const out: Problem[] = [];
  const declared = new Set<string>();
  if (c.variables.length > MAX_VARIABLES)
    out.push({
      kind: "invalid",
      message: `A template may declare at most ${MAX_VARIABLES} variables; this one declares ${c.variables.length}.`,
    });
  for (const v of c.variables) {
    if (!KEY_RE.test(v.key))
      out.push({
        kind: "invalid",
        message: `Variable key \`${v.key}\` must be 1–100 characters of A–Z, a–z, 0–9 or _, not starting with a digit.`,
      });
    else if (RESERVED_KEYS.includes(v.key))
      out.push({ kind: "invalid", message: `Variable key \`${v.key}\` is reserved (${RESERVED_KEYS.join(", ")}).` });
    if (declared.has(v.key)) out.push({ kind: "invalid", message: `Variable \`${v.key}\` is declared twice.` });
    declared.add(v.key);
    if (v.fallback_value !== null && typeof v.fallback_value !== v.type) {
      out.push({ kind: "invalid", message: `The fallback_value of \`${v.key}\` must be a ${v.type}.` });
    }
  }
  for (const key of usedVariables(c)) {
    if (!declared.has(key))
      out.push({
        kind: "invalid",
        message: `Variable \`${key}\` is used in the template but not defined in the variables list.`,
      });
  }
  return out;
}

/** The value of a number variable given as a string, or null when it is not a finite number. */
function numeric(v: string): number | null {
  if (v.trim() === "") return null;
  const n = Number(v);
  return Number.isFinite(n) ? n : null;
}

/** The problems of a send's values against the declarations (see the header). */
export function checkValues(
  vars: readonly VariableDecl[],
  values: Readonly<Record<string, string | number>>,
  template: string,
): Problem[] {
  const out: Problem[] = [];
  const byKey = new Map(vars.map((v) => [v.key, v]));
  for (const [key, value] of Object.entries(values)) {
    const decl = byKey.get(key);
    if (!decl) out.push({ kind: "invalid", message: `Variable \`${key}\` is not declared by template ${template}.` });
    else if (decl.type === "number" && typeof value === "string" && numeric(value) === null) {
      out.push({
        kind: "invalid",
        message: `Variable \`${key}\` of template ${template} is a number; got ${JSON.stringify(value)}.`,
      });
    }
  }
  for (const v of vars) {
    if (!(v.key in values) && v.fallback_value === null)
      out.push({
        kind: "missing",
        message: `Missing required variable \`${v.key}\` for template ${template}.`,
      });
  }
  return out;
}

const ESCAPES: Readonly<Record<string, string>> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
};

/** `s` with & < > " ' as HTML entities. */
export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (ch) => ESCAPES[ch]!);
}

function fill(part: string, lookup: (key: string) => string | null, escape: boolean): string {
  return part.replace(
    USE_RE,
    (whole, raw3: string | undefined, key3: string | undefined, raw2: string | undefined, key2: string | undefined) => {
      const key = key3 ?? key2!;
      const value = lookup(key);
      if (value === null) return whole;
      return escape && (raw3 ?? raw2) !== "&" ? escapeHtml(value) : value;
    },
  );
}

/** The rendered subject, html and text (see the header). */
export function renderContent(
  c: TemplateContent,
  values: Readonly<Record<string, string | number>>,
): { subject: string | null; html: string; text: string | null } {
  const decls = new Map(c.variables.map((v) => [v.key, v]));
  const lookup = (key: string): string | null => {
    const given = values[key];
    if (given !== undefined) return String(given);
    const fb = decls.get(key)?.fallback_value;
    return fb === undefined || fb === null ? null : String(fb);
  };
  return {
    subject: c.subject === null ? null : fill(c.subject, lookup, false),
    html: fill(c.html, lookup, true),
    text: c.text === null ? null : fill(c.text, lookup, false),
  };
}
