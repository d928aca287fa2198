/**
 * The dashboard's views-settings.js, embedded as text (assets.ts): the provider rules, pickup
 * policies and IP warm-up plans (operator), and the key's tenant settings (the unsubscribe
 * default and the daily quota of received mail), which before only the API and the CLI showed.
 * A String.raw literal: it must not contain a backtick or a dollar-brace.
 */

/** views-settings.js */
export const VIEWS_SETTINGS_JS = String.raw`import { $, el, api, fmtTime, table, showError } from "./lib.js";

const enc = encodeURIComponent;

export async function settings() {
  const root = $("view-settings");
  const [
    providers, policies, warmup, mine,
  ] = await Promise.all([api("/relay/providers"), api("/relay/policies"), api("/relay/warmup"), api("/relay/settings")]);
  const windowText = (w) => (w && (w.initial !== undefined || w.limit !== undefined) ? "window " + (w.initial ?? "-") + ".." + (w.limit ?? "-") : "");
  const shape = (p) => [windowText(p.window), p.messages_per_session ? p.messages_per_session + " msgs/session" : "",
    p.recipients_per_message ? p.recipients_per_message + " rcpts/msg" : "", p.rate ? "rate " + p.rate : "", p.require_tls ? "TLS required" : ""]
    .filter(Boolean).join(", ");
  const limits = (p) => [p.concurrency !== null ? "concurrency " + p.concurrency : "", p.rate ? "rate " + p.rate : "",
    p.interval_seconds !== null ? "interval " + p.interval_seconds + "s" : "", p.suspended_until ? "suspended until " + fmtTime(p.suspended_until) : "",
    p.throttle ? "throttled to " + p.throttle.rate + " until " + fmtTime(p.throttle.until) : ""].filter(Boolean).join(", ");
  const caps = (w) => Object.entries(w.caps_today).map(([p, c]) => p + " " + c.per_day + "/d " + c.per_hour + "/h").join(", ") || "none (done)";
  const error = el("div", {});
  const quota = el("form", { class: "inline", "data-testid": "quota-form", onsubmit: async (ev) => {
    ev.preventDefault();
    const v = String(new FormData(/** @type {HTMLFormElement} */ (ev.target)).get("quota") || "").trim();
    try {
      await api("/relay/settings", { method: "PATCH", body: JSON.stringify({ receiving_daily_quota: v === "" ? null : Number(v) }) });
      await settings();
    } catch (e) { showError(error, e); }
  } }, el(
    "label", {}, "Received messages per UTC day ",
    el("input", { name: "quota", type: "number", min: 0, value: mine.receiving_daily_quota ?? "", placeholder: "operator default" }),
  ), el("button", { type: "submit" }, "Save"));
  root.replaceChildren(
    el("h2", {}, "This tenant"),
    table(["setting", "value"], [
      el(
        "tr", { "data-testid": "setting-unsubscribe" }, el("td", {}, "one-click unsubscribe by default"),
        el("td", {}, mine.unsubscribe === null ? "off" : mine.unsubscribe === true ? "on" : "on, topic " + mine.unsubscribe.topic),
      ),
      el(
        "tr", { "data-testid": "setting-quota" }, el("td", {}, "received mail per UTC day"),
        el("td", {}, mine.receiving_daily_quota === null ? "operator default (RECEIVING_DAILY_QUOTA)" : String(mine.receiving_daily_quota)),
      ),
    ], "tenant-settings"),
    quota, error,
    el("h2", {}, "Provider rules"),
    table(
      ["name", "MX suffixes", "shape"],
      providers.data.map((p) => el("tr", { "data-testid": "provider-row" }, el("td", {}, p.name), el("td", {}, p.mx.join(" ")), el("td", {}, shape(p)))),
      "providers",
    ),
    el("h2", {}, "Pickup policies"),
    table(
      ["transport", "key", "limits", "set by"],
      policies.data.map((p) => el(
        "tr", { "data-testid": "policy-row" }, el("td", {}, p.transport), el("td", {}, p.key), el("td", {}, limits(p)),
        el("td", {}, p.set_by || "operator"),
      )),
      "policies",
    ),
    el("h2", {}, "IP warm-up"),
    table([
      "egress", "day", "caps today", "",
    ], warmup.data.map((w) => el("tr", { "data-testid": "warmup-row" }, el("td", {}, w.egress), el("td", {}, w.day + " of " + w.days), el("td", {}, caps(w)),
      el("td", {}, el("button", { type: "button", "data-testid": "warmup-advance", onclick: async () => {
        try { await api(
          "/relay/warmup/" + enc(w.egress) + "/advance", { method: "POST", body: JSON.stringify({ days: 1 }) },
        ); await settings(); } catch (e) { showError(error, e); }
      } }, "Advance a day")))), "warmup"));
}
`;
