/**
 * The dashboard's app.js, embedded as text (assets.ts): plain browser JavaScript that reads the JSON
 * API with the operator's key and renders with the DOM and SVG, textContent only (never HTML from
 * data). A String.raw literal: it must not contain a backtick or a dollar-brace. An ES module: its
 * helpers are lib.js (lib-js.ts), the views of Resend's resources and of the settings are modules
 * of their own (views-resend-js.ts, views-settings-js.ts).
 */

/** app.js */
export const APP_JS = String.raw`/*
 * The operator dashboard's client: a login form (the API key is kept in sessionStorage only),
 * then views that read the JSON API with "Authorization: Bearer <key>" and render it with the
 * DOM (textContent only, never HTML from data) and hand-made SVG charts.
 * Views: overview (queue counts, age percentiles, qshape, throughput), destinations (window chart),
 * messages (search, detail timeline), webhooks, suppressions; domains, API keys, templates and
 * received mail (views-resend.js); provider, policy and warm-up settings (views-settings.js).
 * Shared helpers: lib.js.
 */
const STATES =
  ["incoming", "ready", "active", "deferred", "delivered", "bounced", "expired", "suppressed", "cancelled"];
/** The states of a recipient in the queue (/relay/queue counts these; final ones are throughput). */
const OPEN_STATES = ["incoming", "ready", "active", "deferred"];
const VIEWS = ["overview", "destinations", "messages", "webhooks", "suppressions",
  "domains", "keys", "templates", "received", "settings"];
const SERIES = [["delivered", "#2f855a"], ["bounced", "#c53030"], ["deferred", "#d69e2e"], ["failed", "#718096"]];
import { KEY, $, el, svg, ApiFailure, api, fmtAge, fmtTime, table, card, showError } from "./lib.js";
import { domains, apiKeys, templates, received } from "./views-resend.js";
import { settings } from "./views-settings.js";

/* ---------- charts ---------- */

/** Stacked bars per minute of delivered / bounced / deferred / failed. */
function throughputChart(series) {
  const W = 720, H = 180, pad = 24;
  const max = Math.max(1, ...series.map((p) => p.delivered + p.bounced + p.deferred + p.failed));
  const bw = (W - pad * 2) / Math.max(1, series.length);
  const root = svg("svg", {
    viewBox: "0 0 " + W + " " + (H + pad), class: "chart", role: "img",
    "aria-label": "throughput per minute", "data-testid": "throughput-chart" });
  root.append(svg("line", { x1: pad, y1: H, x2: W - pad, y2: H, stroke: "#999" }));
  root.append(svg("text", { x: 2, y: 12, class: "axis" }, String(max)));
  series.forEach((p, i) => {
    let y = H;
    for (const [name, color] of SERIES) {
      const h = (p[name] / max) * (H - pad);
      if (h <= 0) continue;
      y -= h;
      const r = svg("rect", { x: pad + i * bw + 1, y, width: Math.max(1, bw - 2), height: h, fill: color });
      r.append(svg("title", {}, new Date(p.at).toLocaleTimeString() + " " + name + ": " + p[name]));
      root.append(r);
    }
  });
  if (series.length) {
    root.append(svg("text", { x: pad, y: H + 16, class: "axis" }, new Date(series[0].at).toLocaleTimeString()));
    root.append(svg("text", { x: W - pad, y: H + 16, class: "axis", "text-anchor": "end" },
      new Date(series[series.length - 1].at).toLocaleTimeString()));
  }
  return root;
}

/** The destination's window over time (a step line), failures marked. */
function windowChart(history) {
  const W = 720, H = 160, pad = 24;
  const root = svg("svg", {
    viewBox: "0 0 " + W + " " + (H + pad), class: "chart", role: "img",
    "aria-label": "window over time", "data-testid": "window-chart" });
  if (history.length === 0) {
    root.append(svg("text", { x: W / 2, y: H / 2, "text-anchor": "middle", class: "axis" }, "no feedback yet"));
    return root;
  }
  // One step per feedback event, oldest on the left (reports often arrive within one second).
  const max = Math.max(1, ...history.map((h) => h.window));
  const x = (i) => pad + (history.length > 1 ? i / (history.length - 1) : 0.5) * (W - pad * 2);
  const y = (w) => H - (w / max) * (H - pad);
  let d = "";
  history.forEach((h, i) => { d += (i ? " H " + x(i) + " V " : "M " + x(i) + " ") + y(h.window); });
  root.append(svg("line", { x1: pad, y1: H, x2: W - pad, y2: H, stroke: "#999" }));
  root.append(svg("text", { x: 2, y: y(max) + 4, class: "axis" }, String(max)));
  root.append(svg("path", { d, fill: "none", stroke: "#2b6cb0", "stroke-width": 2 }));
  root.append(svg("text", { x: pad, y: H + 16, class: "axis" }, fmtTime(history[0].at)));
  root.append(svg("text", { x: W - pad, y: H + 16, class: "axis", "text-anchor": "end" },
    fmtTime(history[history.length - 1].at)));
  history.forEach((h, i) => {
    const c = svg("circle",
      { cx: x(i), cy: y(h.window), r: 3, fill: h.kind === "success" ? "#2f855a" : "#c53030" });
    c.append(svg("title", {},
      fmtTime(h.at) + " " + h.kind + " → window " + h.window + (h.reason ? " (" + h.reason + ")" : "")));
    root.append(c);
  });
  return root;
}

/* ---------- views ---------- */

async function overview() {
  const root = $("view-overview");
  const [q, stats] = await Promise.all([api("/relay/queue"), api("/relay/stats?window=60")]);
  const counts = q.counts;
  const qshapeTable = (rows, testid) => table(
    ["transport", "destination", "total"].concat(q.buckets_min.map((m) => "≤" + m + "m"), ["more"]),
    rows.map((r) => el("tr", {},
      el("td", {}, r.transport), el("td", {}, r.destination), el("td", { class: "num" }, r.total),
      r.buckets.map((n) => el("td", { class: "num" }, n)))),
    testid);
  root.replaceChildren(
    el("div", { class: "toolbar" },
      el("button", {
        type: "button", "data-testid": "flush-all",
        onclick: async () => { await api("/relay/flush", { method: "POST", body: "{}" }); await render(); },
      }, "Flush all (postqueue -f)"),
      el("span", { class: "muted" }, "generated " + fmtTime(q.generated_at))),
    el("h2", {}, "Recipients in the queue, by state"),
    el("div", { class: "cards" },
      card("total", counts.total, "count-total"),
      OPEN_STATES.map((s) => card(s, counts.by_state[s] || 0, "count-" + s))),
    el("h2", {}, "Age of recipients not yet final"),
    el("div", { class: "cards" },
      card("open", q.open.count, "open-count"),
      q.open.age_percentiles.map((p) => card("p" + p.p, fmtAge(p.age_seconds), "age-p" + p.p))),
    el("h2", {}, "Throughput, last " + stats.window_minutes + " minutes"),
    el("div", { class: "legend" }, SERIES.map(([name, color]) => el("span", {},
      el("i", { style: "background:" + color }), name + " ",
      el("b", { "data-testid": "tp-" + name }, String(stats.totals[name]))))),
    throughputChart(stats.series),
    el("h2", {}, "By transport"),
    table(["transport", "total"].concat(OPEN_STATES),
      counts.by_transport.map((g) => el("tr", { "data-testid": "transport-row" },
        el("td", {}, g.transport || "—"), el("td", { class: "num" }, g.total),
        OPEN_STATES.map((s) => el("td", { class: "num" }, g.states[s] || 0)))),
      "by-transport"),
    el("h2", {}, "By destination"),
    table(["transport", "destination", "total"].concat(OPEN_STATES),
      counts.by_destination.map((g) => el("tr", { "data-testid": "destination-row" },
        el("td", {}, g.transport || "—"), el("td", {}, g.destination || "—"), el("td", { class: "num" }, g.total),
        OPEN_STATES.map((s) => el("td", { class: "num" }, g.states[s] || 0)))),
      "by-destination"),
    el("h2", {}, "Active queue (qshape)"),
    qshapeTable(q.qshape, "qshape-active"),
    el("h2", {}, "Deferred queue (qshape deferred)"),
    qshapeTable(q.deferred, "qshape-deferred"),
  );
}

async function destinations() {
  const root = $("view-destinations");
  const [list, susp] = await Promise.all([api("/relay/destinations"), api("/relay/suspensions")]);
  const detail = el("div", { id: "destination-detail" });
  const suspend = async (body) => {
    await api("/relay/suspensions", { method: "POST", body: JSON.stringify(body) });
    await render();
  };
  const resume = async (s) => {
    await api("/relay/suspensions/" + encodeURIComponent(s.target) + "/" + encodeURIComponent(s.name) +
      (s.transport && s.target === "destination" ? "?transport=" + encodeURIComponent(s.transport) : ""),
    { method: "DELETE" });
    await render();
  };
  const rows = list.data.map((d) => el("tr", { "data-testid": "destination", "data-queue": d.queue },
    el("td", {}, d.transport),
    el("td", {}, el("a", {
      href: "#destinations",
      onclick: (ev) => { ev.preventDefault(); void showDestination(detail, d.transport, d.queue); },
    }, d.queue)),
    el("td", {}, d.state), el("td", { class: "num" }, d.window), el("td", { class: "num" }, d.busy),
    el("td", { class: "num" }, d.todo), el("td", { class: "num" }, d.limit || "∞"),
    el("td", {}, fmtTime(d.dead_until)), el("td", {}, fmtTime(d.suspended_until)),
    el("td", { class: "resp" }, d.last_response || "—"),
    el("td", {}, el("button", {
      type: "button",
      onclick: () => suspend({ target: "destination", transport: d.transport, name: d.queue, ttl_seconds: 3600 }),
    }, "Suspend 1h"))));
  const form = el("form", { class: "inline", onsubmit: async (ev) => {
    ev.preventDefault();
    const f = new FormData(/** @type {HTMLFormElement} */ (ev.target));
    try {
      await suspend({
        target: f.get("target"), name: f.get("name"), ttl_seconds: Number(f.get("ttl")) * 60,
        ...(f.get("transport") ? { transport: f.get("transport") } : {}) });
    } catch (e) { showError(detail, e); }
  } },
  el("select", { name: "target" },
    ["destination", "tenant", "transport", "site", "egress"].map((t) => el("option", { value: t }, t))),
  el("input", { name: "name", placeholder: "name", required: true }),
  el("input", { name: "transport", placeholder: "transport (destination)" }),
  el("input", { name: "ttl", type: "number", min: 1, value: 60, title: "minutes" }),
  el("button", { type: "submit" }, "Suspend"));
  root.replaceChildren(
    el("h2", {}, "Destinations"),
    table(["transport", "queue", "state", "window", "busy", "todo", "limit", "dead until", "suspended until",
      "last response", ""], rows, "destinations"),
    el("h2", {}, "Suspensions"),
    table(["target", "transport", "name", "until", ""], susp.data.map((s) => el("tr", { "data-testid": "suspension" },
      el("td", {}, s.target), el("td", {}, s.transport || "all"), el("td", {}, s.name), el("td", {}, fmtTime(s.until)),
      el("td", {}, el("button", { type: "button", onclick: () => resume(s) }, "Resume")))), "suspensions"),
    form,
    detail,
  );
}

async function showDestination(where, transport, queue) {
  try {
    const d = await api("/relay/destinations/" + encodeURIComponent(transport) + "/" + encodeURIComponent(queue));
    where.replaceChildren(
      el("h2", {}, "Destination " + transport + "/" + queue),
      el("div", { class: "cards" },
        card("window", d.window ?? "—", "dest-window"), card("busy", d.busy, "dest-busy"),
        card("limit", d.limit || "∞", "dest-limit"), card("state", d.state, "dest-state"),
        card("dead until", fmtTime(d.record ? d.record.dead_until : d.dead_until), "dest-dead-until")),
      el("p", {}, "Last response: ",
        el("span", { class: "resp" }, d.last_response || (d.record && d.record.reason) || "—")),
      el("h3", {}, "Window over time (Destination DO feedback history)"),
      windowChart(d.history),
      table(["time", "kind", "outcome", "window", "busy", "reason"],
        d.history.slice(-20).reverse().map((h) => el("tr", {},
          el("td", {}, fmtTime(h.at)), el("td", {}, h.kind), el("td", {}, h.outcome),
          el("td", { class: "num" }, h.window), el("td", { class: "num" }, h.busy), el("td", {}, h.reason || ""))),
        "destination-history"),
    );
  } catch (e) { showError(where, e); }
}

async function messages() {
  const root = $("view-messages");
  const results = el("div", { id: "message-results" });
  const detail = el("div", { id: "message-detail" });
  const form = el("form", { class: "inline", "data-testid": "search-form", onsubmit: async (ev) => {
    ev.preventDefault();
    const f = new FormData(/** @type {HTMLFormElement} */ (ev.target));
    const qs = new URLSearchParams();
    for (const k of ["id", "address", "tag", "state"]) { const v = String(f.get(k) || "").trim(); if (v) qs.set(k, v); }
    qs.set("limit", "50");
    try {
      const page = await api("/relay/messages?" + qs.toString());
      results.replaceChildren(
        table(["id", "tenant", "created", "from", "subject", "last event", "recipients"],
          page.data.map((m) => el("tr", { "data-testid": "message-row" },
            el("td", {}, el("a", {
              href: "#messages",
              onclick: (e2) => { e2.preventDefault(); void showMessage(detail, m.id); },
            }, m.id)),
            el("td", {}, m.tenant), el("td", {}, fmtTime(m.created_at)),
            el("td", {}, m.from), el("td", {}, m.subject || ""), el("td", {}, m.last_event),
            el("td", {}, m.recipients.map((r) => r.email + " (" + r.status + ")").join(", ")))),
          "message-results"),
        page.has_more ? el("p", { class: "muted" }, "more results: narrow the search") : "");
    } catch (e) { showError(results, e); }
  } },
  el("input", { name: "id", placeholder: "email id" }),
  el("input", { name: "address", placeholder: "recipient address" }),
  el("input", { name: "tag", placeholder: "tag name[:value]" }),
  el("select", { name: "state" },
    el("option", { value: "" }, "any state"), STATES.map((s) => el("option", { value: s }, s))),
  el("button", { type: "submit" }, "Search"));
  root.replaceChildren(el("h2", {}, "Messages"), form, results, detail);
}

async function showMessage(where, id) {
  try {
    const m = await api("/relay/messages/" + encodeURIComponent(id));
    // The reply text often starts with the enhanced code already.
    const resp = (r) => (r
      ? [r.code, r.enhanced && !String(r.text || "").startsWith(r.enhanced) ? r.enhanced : null, r.text]
        .filter(Boolean).join(" ") + (r.mx ? " (" + r.mx + ")" : "")
      : "—");
    where.replaceChildren(
      el("h2", {}, "Message " + m.id),
      el("p", {}, "Tenant ", el("b", {}, m.tenant), " · from ", m.from, " · subject ", el("b", {}, m.subject || ""),
        " · last event ", el("b", { "data-testid": "message-last-event" }, m.last_event)),
      // Operator actions (postsuper -h / -H / -r / -d); the page shows the message again after each.
      el("div", { id: "message-actions", class: "toolbar", "data-testid": "message-actions" },
        ["hold", "release", "requeue", "cancel"].map((action) => el("button", {
          type: "button", "data-testid": "action-" + action,
          onclick: async () => {
            try {
              await api("/relay/messages/" + encodeURIComponent(m.id) + "/" + action, { method: "POST", body: "{}" });
              await showMessage(where, id);
            } catch (e) { showError(where, e); }
          },
        }, action[0].toUpperCase() + action.slice(1)))),
      el("h3", {}, "Recipients"),
      table(["recipient", "status", "attempts", "next attempt", "last response", "blocked by"],
        m.recipients.map((r) => el("tr", { "data-testid": "recipient-row" },
          el("td", {}, r.email), el("td", {}, r.status), el("td", { class: "num" }, r.attempts),
          el("td", {}, fmtTime(r.next_attempt_at)), el("td", { class: "resp" }, resp(r.last_response)),
          el("td", {}, r.blocked_by || "—"))),
        "recipients"),
      el("h3", {}, "Timeline"),
      el("ol", { class: "timeline", "data-testid": "timeline" }, m.events.map((e) => el("li", {},
        el("time", {}, fmtTime(e.created_at)), " ", el("b", {}, e.type), e.recipient ? " " + e.recipient : "",
        e.data && e.data.attempt ? " · attempt " + e.data.attempt : "",
        e.data && e.data.response ? el("span", { class: "resp" }, " · " + resp(e.data.response)) : ""))),
    );
  } catch (e) { showError(where, e); }
}

async function webhooks() {
  const root = $("view-webhooks");
  const list = await api("/webhooks?limit=100");
  const rows = await Promise.all(list.data.map(async (w) => {
    let failures = "—";
    try {
      const dl = await api("/relay/webhooks/" + encodeURIComponent(w.id) + "/dead-letters");
      const items = dl.data || [];
      const last = items[items.length - 1];
      failures = items.length + (dl.has_more ? "+" : "") + " dead letter(s)" + (last
        ? "; last " + fmtTime(last.dead_lettered_at) + " " + last.type + ": " + (last.reason || "") +
          " after " + last.attempts + " attempt(s)"
        : "");
    } catch (e) {
      failures = e instanceof ApiFailure && e.status === 404
        ? "not available"
        : String(e instanceof Error ? e.message : e);
    }
    return el("tr", { "data-testid": "webhook-row" }, el("td", {}, w.id), el("td", {}, w.endpoint),
      el("td", {}, w.status), el("td", {}, (w.events || ["all"]).join(", ")), el("td", {}, failures));
  }));
  root.replaceChildren(el("h2", {}, "Webhook endpoints (this key's tenant)"),
    table(["id", "endpoint", "status", "events", "recent failures"], rows, "webhooks"));
}

async function suppressions() {
  const root = $("view-suppressions");
  const [list, cr] = await Promise.all([api("/relay/suppressions?limit=100"), api("/relay/complaint-rate?days=7")]);
  const pct = (r) => (r * 100).toFixed(3) + " %";
  const over = (r) =>
    (r.rate > cr.threshold ? { class: "num", style: "color:#b00020;font-weight:bold" } : { class: "num" });
  root.replaceChildren(el("h2", {}, "Complaint rate, last " + cr.days + " days (line: " + pct(cr.threshold) + ")"),
    table(["sending domain", "delivered", "complained", "rate"], [el("tr", { "data-testid": "complaint-total" },
      el("td", {}, "all"), el("td", { class: "num" }, cr.totals.delivered),
      el("td", { class: "num" }, cr.totals.complained),
      el("td", over(cr.totals), pct(cr.totals.rate)))]
      .concat(cr.domains.map((d) => el("tr", { "data-testid": "complaint-domain" },
        el("td", {}, d.domain), el("td", { class: "num" }, d.delivered), el("td", { class: "num" }, d.complained),
        el("td", over(d), pct(d.rate))))), "complaint-rate"),
    cr.bulk_paused_until
      ? el("p", { "data-testid": "bulk-paused", style: "color:#b00020" },
        "Bulk mail (with unsubscribe) is paused until " + fmtTime(cr.bulk_paused_until) +
        " by the complaint-rate brake.")
      : "",
    el("h2", {}, "Suppressions (this key's tenant)"),
    table(["address", "mail held back", "reason", "since", "until"],
      list.data.map((s) => el("tr", { "data-testid": "suppression-row" },
        el("td", {}, s.address), el("td", {}, s.scope), el("td", {}, s.reason), el("td", {}, fmtTime(s.created_at)),
        el("td", {}, s.expires_at ? fmtTime(s.expires_at) : "removed by hand"))),
      "suppressions"),
    list.has_more ? el("p", { class: "muted" }, "showing the first 100") : "");
}

const RENDER =
  { overview, destinations, messages, webhooks, suppressions, domains, keys: apiKeys, templates, received, settings };

function currentView() {
  const v = location.hash.replace(/^#/, "");
  return VIEWS.includes(v) ? v : "overview";
}

/** Shows the login form or the current view. */
async function render() {
  const signedIn = Boolean(sessionStorage.getItem(KEY));
  $("login").hidden = signedIn;
  $("nav").hidden = !signedIn;
  $("logout").hidden = !signedIn;
  const view = currentView();
  for (const v of VIEWS) $("view-" + v).hidden = !signedIn || v !== view;
  for (const b of document.querySelectorAll("#nav a"))
    b.setAttribute("aria-current", b.getAttribute("href") === "#" + view ? "page" : "false");
  if (!signedIn) return;
  try {
    await RENDER[view]();
    document.body.dataset.ready = view;
  } catch (e) {
    if (e instanceof ApiFailure && (e.status === 401 || e.status === 403)) {
      sessionStorage.removeItem(KEY);
      $("login-error").textContent = e.message;
      await render();
      return;
    }
    showError($("view-" + view), e);
  }
}

$("login-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const input = /** @type {HTMLInputElement} */ ($("key"));
  sessionStorage.setItem(KEY, input.value.trim());
  input.value = "";
  $("login-error").textContent = "";
  await render();
});
$("logout").addEventListener("click", async () => {
  sessionStorage.removeItem(KEY);
  delete document.body.dataset.ready;
  await render();
});
window.addEventListener("hashchange", () => { delete document.body.dataset.ready; void render(); });
void render();
`;
