// @ts-check
/** cohort's text output: the tables and lines the CLI prints without --json. */

/** Formats rows as an aligned text table (numbers right-aligned). */
export function textTable(head, rows) {
  const all = [head, ...rows].map((r) => r.map((c) => (c === null || c === undefined ? "-" : String(c))));
  const widths = head.map((_, i) => Math.max(...all.map((r) => r[i].length)));
  return all
    .map((r) =>
      r
        .map((c, i) => (i > 0 && /^-?\d+$/.test(c) ? c.padStart(widths[i]) : c.padEnd(widths[i])))
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}

function ageText(sec) {
  if (sec < 60) return `${sec}s`;
  if (sec < 3600) return `${Math.floor(sec / 60)}m${String(sec % 60).padStart(2, "0")}s`;
  return `${Math.floor(sec / 3600)}h${String(Math.floor((sec % 3600) / 60)).padStart(2, "0")}m`;
}

function qshapeText(title, rows, buckets) {
  const head = ["", "T", ...buckets.map(String), `${buckets[buckets.length - 1]}+`];
  return `${title}\n${textTable(
    head,
    rows.map((r) => [r.transport ? `${r.transport}/${r.destination}` : r.destination, r.total, ...r.buckets]),
  )}`;
}

export function queueText(q) {
  const states =
    Object.entries(q.counts.by_state)
      .map(([s, n]) => `${s}=${n}`)
      .join(" ") || "(none)";
  const ages = q.open.age_percentiles.map((p) => `p${p.p}=${ageText(p.age_seconds)}`).join(" ") || "-";
  return [
    qshapeText("active queue (minutes since arrival):", q.qshape, q.buckets_min),
    "",
    qshapeText("deferred queue:", q.deferred, q.buckets_min),
    "",
    `recipients in the queue: total=${q.counts.total} ${states}`,
    `not yet final: ${q.open.count} (age ${ages})`,
    `transports: ${q.transports.map((t) => `${t.transport} in-core=${t.in_core} deferred=${t.deferred} inflight=${t.inflight}`).join("; ")}`,
  ].join("\n");
}

function responseText(r) {
  if (!r) return "";
  // The reply text often starts with the enhanced code already.
  const enhanced = r.enhanced && !String(r.text ?? "").startsWith(r.enhanced) ? r.enhanced : null;
  return (
    [r.code, enhanced, r.text].filter((x) => x !== null && x !== undefined && x !== "").join(" ") +
    (r.mx ? ` (${r.mx})` : "")
  );
}

export function showText(m) {
  const lines = [
    `${m.id}  tenant=${m.tenant}  last_event=${m.last_event}`,
    `from ${m.from}  subject ${JSON.stringify(m.subject)}  created ${m.created_at}`,
    "",
    "recipients:",
  ];
  lines.push(
    textTable(
      ["address", "status", "attempts", "next attempt", "blocked by", "last response"],
      m.recipients.map((r) => [
        r.email,
        r.status,
        r.attempts,
        r.next_attempt_at,
        r.blocked_by,
        responseText(r.last_response),
      ]),
    ),
  );
  lines.push("", "timeline:");
  for (const e of m.events) {
    const d = e.data ?? {};
    lines.push(
      `  ${e.created_at}  ${e.type}${e.recipient ? `  ${e.recipient}` : ""}` +
        `${d.attempt ? `  attempt ${d.attempt}` : ""}${d.response ? `  ${responseText(d.response)}` : ""}`,
    );
  }
  return lines.join("\n");
}

export function eventLine(e) {
  const d = e.data ?? {};
  const who = d.recipient ?? (Array.isArray(d.to) ? d.to.join(",") : "");
  const reply = d.delivery
    ? `  ${[d.delivery.smtp_code, d.delivery.response].filter((x) => x !== null && x !== undefined && x !== "").join(" ")}`
    : "";
  return `${e.created_at}  ${e.type.padEnd(22)}  ${d.email_id ?? ""}  ${who}${reply}`.trimEnd();
}
