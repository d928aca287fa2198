/*
 * NAME
 *   prom - the Prometheus text exposition format (version 0.0.4) and the bounded class of a reply
 *
 * DESCRIPTION
 *   formatFamilies(families)  the text of metric families: per family a "# HELP" and a "# TYPE"
 *                             line, then one sample line per sample, labels in the order given,
 *                             label values escaped (backslash, double quote, line feed), HELP
 *                             text escaped (backslash, line feed), values as Prometheus reads
 *                             them (NaN, +Inf, -Inf, integers without exponent).
 *   replyClass(code, enhanced)  the bounded class of a reply: the code's first digit and the
 *                             enhanced status's class and subject ("5", "5.1"); "none" without.
 *
 * INVARIANTS
 *   Pure. Metric and label names match [a-zA-Z_][a-zA-Z0-9_]*; a family with no sample is left out.
 *
 * ERRORS
 *   Throws for an invalid metric or label name (a bug in the caller).
 */

export interface Sample {
  labels?: Record<string, string>;
  value: number;
}

export interface Family {
  name: string;
  help: string;
  type: "gauge" | "counter";
  samples: Sample[];
}

const NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

const escapeLabel = (v: string) => v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
const escapeHelp = (v: string) => v.replace(/\\/g, "\\\\").replace(/\n/g, "\\n");

function formatValue(v: number): string {
  if (Number.isNaN(v)) return "NaN";
  if (v === Infinity) return "+Inf";
  if (v === -Infinity) return "-Inf";
  return Number.isInteger(v) ? v.toFixed(0) : String(v);
}

export function formatFamilies(families: readonly Family[]): string {
  const out: string[] = [];
  for (const f of families) {
    if (!NAME.test(f.name)) throw new Error(`invalid metric name ${f.name}`);
    if (f.samples.length === 0) continue;
    out.push(`# HELP ${f.name} ${escapeHelp(f.help)}`, `# TYPE ${f.name} ${f.type}`);
    for (const s of f.samples) {
      const labels = Object.entries(s.labels ?? {});
      for (const [k] of labels) if (!NAME.test(k)) throw new Error(`invalid label name ${k}`);
      const text = labels.length === 0 ? "" : `{${labels.map(([k, v]) => `${k}="${escapeLabel(v)}"`).join(",")}}`;
      out.push(`${f.name}${text} ${formatValue(s.value)}`);
    }
  }
  return out.length === 0 ? "" : `${out.join("\n")}\n`;
}

export function replyClass(
  code: number | undefined | null,
  enhanced: string | undefined | null,
): { code: string; enhanced: string } {
  const c = typeof code === "number" && code >= 200 && code < 600 ? String(Math.floor(code / 100)) : "none";
  const m = /^([245])\.(\d{1,3})\./.exec(enhanced ?? "");
  return { code: c, enhanced: m ? `${m[1]}.${m[2]}` : "none" };
}
