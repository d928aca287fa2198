/**
 * What every campaign returns, the human-readable table of them, and the results block of
 * docs/reliability.md, merged so that rerunning some campaigns keeps the others' rows.
 *
 * DESCRIPTION
 *   CampaignResult      { campaign, tried, result ("pass" | "fail" | "partial"), figures (a
 *                       one-line summary), details (free JSON for --json), failures (strings),
 *                       table (optional Markdown with the campaign's own rows) }.
 *   formatTable(rows)   a Markdown table: campaign | what was tried | result | figures.
 *   mergeResults(old, rows, run)  the new text of the doc's results block: the old block's rows,
 *                       detail tables and failures of the campaigns not in `rows` are kept; the
 *                       ones in `rows` are replaced, labelled with `run` (mode, seed, time).
 */

/** One campaign's result. */
export interface CampaignResult {
  campaign: string;
  tried: string;
  result: "pass" | "fail" | "partial";
  figures: string;
  failures: string[];
  details: Record<string, unknown>;
  /** An optional Markdown table with the campaign's own rows (printed and put in the doc). */
  table?: string;
}

function cell(s: string): string {
  return s.replace(/\|/g, "\\|").replace(/\n/g, " ");
}

/** A Markdown table of the results. */
export function formatTable(rows: CampaignResult[]): string {
  const lines = ["| campaign | what was tried | result | figures |", "|---|---|---|---|"];
  for (const r of rows)
    lines.push(`| ${cell(r.campaign)} | ${cell(r.tried)} | ${r.result.toUpperCase()} | ${cell(r.figures)} |`);
  return lines.join("\n");
}

const ORDER = ["crash", "faults", "fuzz", "load"];
const HEADER = ["| campaign | run | what was tried | result | figures |", "|---|---|---|---|---|"];

interface Block {
  rows: Map<string, string>;
  details: Map<string, string>;
  failures: Map<string, string[]>;
}

function parseBlock(text: string): Block {
  const b: Block = { rows: new Map(), details: new Map(), failures: new Map() };
  for (const line of text.split("\n")) {
    const row = /^\| ([a-z]+) \| /.exec(line);
    if (row && ORDER.includes(row[1]!)) b.rows.set(row[1]!, line);
    const fail = /^- ([a-z]+): /.exec(line);
    if (fail && ORDER.includes(fail[1]!)) b.failures.set(fail[1]!, [...(b.failures.get(fail[1]!) ?? []), line]);
  }
  for (const m of text.matchAll(/<!-- chaos:detail:([a-z]+) -->\n([\s\S]*?)\n<!-- \/chaos:detail:\1 -->/g))
    b.details.set(m[1]!, m[2]!);
  return b;
}

/** The merged results block (see the header). */
export function mergeResults(old: string, rows: CampaignResult[], run: string): string {
  const b = parseBlock(old);
  for (const r of rows) {
    b.rows.set(
      r.campaign,
      `| ${r.campaign} | ${cell(run)} | ${cell(r.tried)} | ${r.result.toUpperCase()} | ${cell(r.figures)} |`,
    );
    if (r.table) b.details.set(r.campaign, `**${r.campaign}** (${run})\n\n${r.table}`);
    else b.details.delete(r.campaign);
    b.failures.set(
      r.campaign,
      r.failures.map((f) => `- ${r.campaign}: ${f.replace(/\n/g, " ")}`),
    );
  }
  const names = ORDER.filter((n) => b.rows.has(n));
  const failures = names.flatMap((n) => b.failures.get(n) ?? []);
  return [
    ...HEADER,
    ...names.map((n) => b.rows.get(n)!),
    ...names
      .filter((n) => b.details.has(n))
      .flatMap((n) => ["", `<!-- chaos:detail:${n} -->`, b.details.get(n)!, `<!-- /chaos:detail:${n} -->`]),
    ...(failures.length ? ["", "Failures in the runs above:", "", ...failures] : []),
  ].join("\n");
}
