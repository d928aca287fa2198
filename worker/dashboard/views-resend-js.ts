/**
 * The dashboard's views-resend.js, embedded as text (assets.ts): the views of Resend's resources
 * for the key's tenant: sending and receiving domains (records, verify, receiving on/off), API
 * keys (create, rename, revoke), templates (variables, a rendered preview, publish) and received
 * mail (its text and attachments' download links). Text only from data; a template's preview is
 * shown in a sandboxed frame (no scripts, no origin).
 * A String.raw literal: it must not contain a backtick or a dollar-brace.
 */

/** views-resend.js */
export const VIEWS_RESEND_JS = String.raw`import { $, el, api, fmtTime, table, card, showError } from "./lib.js";

const enc = encodeURIComponent;
const link = (label, onclick) => el("a", { href: location.hash, onclick: (ev) => { ev.preventDefault(); void onclick(); } }, label);
const submitTo = (handler) => async (ev) => {
  ev.preventDefault();
  const form = /** @type {HTMLFormElement} */ (ev.target);
  try { await handler(new FormData(form)); } catch (e) { showError(/** @type {HTMLElement} */ (form.nextElementSibling), e); }
};

/* ---------- domains ---------- */

export async function domains() {
  const root = $("view-domains");
  const list = await api("/domains");
  const detail = el("div", { id: "domain-detail" });
  const open = (id) => showDomain(detail, id);
  root.replaceChildren(
    el("h2", {}, "Domains (this key's tenant)"),
    table(["domain", "status", "sending", "receiving", "region", "created"], list.data.map((d) => el("tr", { "data-testid": "domain-row" },
      el(
        "td", {}, link(d.name, () => open(d.id)),
      ), el("td", {}, d.status), el(
        "td", {}, d.capabilities.sending,
      ), el("td", {}, d.capabilities.receiving), el("td", {}, d.region), el("td", {}, fmtTime(d.created_at)))), "domains"),
    el("form", { class: "inline", "data-testid": "domain-form", onsubmit: submitTo(async (f) => {
      const d = await api("/domains", { method: "POST", body: JSON.stringify({ name: String(f.get("name") || "").trim() }) });
      await domains();
      await showDomain($("domain-detail"), d.id);
    }) }, el("input", { name: "name", placeholder: "example.com", required: true }), el("button", { type: "submit" }, "Add domain")),
    el("div", {}),
    detail);
}

async function showDomain(where, id) {
  try {
    const d = await api("/domains/" + enc(id));
    const receiving = d.capabilities.receiving === "enabled";
    const act = async (init, path) => { await api(path || "/domains/" + enc(id), init); await domains(); await showDomain($("domain-detail"), id); };
    where.replaceChildren(
      el("h2", {}, "Domain " + d.name),
      el("div", { class: "cards" }, card("status", d.status, "domain-status"), card("receiving", d.capabilities.receiving, "domain-receiving")),
      el("div", { class: "toolbar" },
        el(
          "button", { type: "button", "data-testid": "domain-verify", onclick: () => act({ method: "POST" }, "/domains/" + enc(id) + "/verify") },
          "Verify DNS now",
        ),
        el("button", {
          type: "button", "data-testid": "domain-receiving-toggle",
          onclick: () => act({ method: "PATCH", body: JSON.stringify({ capabilities: { receiving: receiving ? "disabled" : "enabled" } }) }),
        },
          receiving ? "Stop receiving" : "Receive mail")),
      el(
        "p", { class: "muted" },
        receiving ? "Mail to this domain is kept once it is verified and routed to the relay by Email Routing." : "Mail to this domain is refused.",
      ),
      el("h3", {}, "DNS records to publish"),
      table(["record", "type", "name", "value", "status"], d.records.map((r) => el("tr", { "data-testid": "domain-record" },
        el("td", {}, r.record), el("td", {}, r.type), el("td", {}, r.name), el("td", { class: "resp" }, r.value), el("td", {}, r.status))), "domain-records"));
  } catch (e) { showError(where, e); }
}

/* ---------- API keys ---------- */

export async function apiKeys() {
  const root = $("view-keys");
  const list = await api("/api-keys");
  const shown = el("div", { id: "key-token" });
  const rename = (k) => el("form", { class: "inline", onsubmit: submitTo(async (f) => {
    await api("/api-keys/" + enc(k.id), { method: "PATCH", body: JSON.stringify({ name: String(f.get("name") || "") }) });
    await apiKeys();
  }) }, el(
    "input", { name: "name", value: k.name, required: true, "aria-label": "name of " + k.id },
  ), el("button", { type: "submit", "data-testid": "key-rename" }, "Rename"));
  root.replaceChildren(
    el("h2", {}, "API keys (this key's tenant)"),
    table(["id", "name", "created", "rename", ""], list.data.map((k) => el("tr", { "data-testid": "key-row" },
      el(
        "td", { class: "resp" }, k.id,
      ), el("td", { "data-testid": "key-name" }, k.name), el("td", {}, fmtTime(k.created_at)), el("td", {}, rename(k), el("div", {})),
      el(
        "td", {},
        el("button", { type: "button", onclick: async () => { await api("/api-keys/" + enc(k.id), { method: "DELETE" }); await apiKeys(); } }, "Revoke"),
      ))), "keys"),
    el("h3", {}, "New key"),
    el("form", { class: "inline", "data-testid": "key-form", onsubmit: submitTo(async (f) => {
      const k = await api(
        "/api-keys", { method: "POST", body: JSON.stringify({ name: String(f.get("name") || ""), permission: String(f.get("permission")) }) },
      );
      await apiKeys();
      $("key-token").replaceChildren(el("p", {}, "The new key, shown this once: ", el("code", { "data-testid": "key-token" }, k.token)));
    }) }, el("input", { name: "name", placeholder: "name", required: true }),
    el("select", { name: "permission" }, el("option", { value: "full_access" }, "full access"), el("option", { value: "sending_access" }, "sending only")),
    el("button", { type: "submit" }, "Create key")),
    el("div", {}),
    shown);
}

/* ---------- templates ---------- */

export async function templates() {
  const root = $("view-templates");
  const list = await api("/templates?limit=100");
  const detail = el("div", { id: "template-detail" });
  root.replaceChildren(
    el("h2", {}, "Templates (this key's tenant)"),
    table(["name", "alias", "status", "updated", "published"], list.data.map((t) => el("tr", { "data-testid": "template-row" },
      el(
        "td", {}, link(t.name, () => showTemplate(detail, t.id)),
      ), el("td", {}, t.alias || "—"), el("td", {}, t.status), el("td", {}, fmtTime(t.updated_at)), el("td", {}, fmtTime(t.published_at)))), "templates"),
    detail);
}

async function showTemplate(where, id) {
  try {
    const t = await api("/templates/" + enc(id));
    const preview = el("div", { id: "template-preview" });
    const inputs = t.variables.map((v) => el(
      "label", {}, v.key + " ",
      el(
        "input",
        {
          name: v.key, value: v.fallback_value === null ? "" : String(v.fallback_value),
          placeholder: v.type + (v.fallback_value === null ? ", required" : ""),
        },
      ),
    ));
    const show = async (f) => {
      const variables = {};
      for (const v of t.variables) { const x = String(f.get(v.key) || ""); if (x !== "") variables[v.key] = v.type === "number" ? Number(x) : x; }
      const p = await api("/relay/templates/" + enc(id) + "/preview", { method: "POST", body: JSON.stringify({ variables }) });
      const frame = el("iframe", { sandbox: "", title: "rendered html", class: "preview", "data-testid": "template-preview-frame" });
      frame.srcdoc = p.html;
      preview.replaceChildren(el("p", {}, "Subject: ", el("b", { "data-testid": "template-preview-subject" }, p.subject || "—")), frame,
        el("h3", {}, "Text"), el("pre", { class: "resp", "data-testid": "template-preview-text" }, p.text || "—"),
        el("h3", {}, "HTML source"), el("pre", { class: "resp", "data-testid": "template-preview-html" }, p.html));
    };
    where.replaceChildren(
      el("h2", {}, "Template " + t.name),
      el(
        "div", { class: "cards" }, card("status", t.status, "template-status"),
        card("draft changed", t.has_unpublished_versions ? "yes" : "no", "template-changed"),
        card("published", fmtTime(t.published_at), "template-published"),
      ),
      el("p", {}, "From ", t.from || "—", " · subject ", el("b", {}, t.subject || "—")),
      el(
        "div", { class: "toolbar" },
        el(
          "button",
          {
            type: "button", "data-testid": "template-publish",
            onclick: async () => { await api(
              "/templates/" + enc(id) + "/publish", { method: "POST" },
            ); await templates(); await showTemplate($("template-detail"), id); },
          },
          "Publish the draft",
        ),
      ),
      el("h3", {}, "Variables"),
      table(
        ["key", "type", "fallback"],
        t.variables.map((v) => el(
          "tr", { "data-testid": "template-variable" }, el("td", {}, v.key), el("td", {}, v.type),
          el("td", {}, v.fallback_value === null ? "required" : String(v.fallback_value)),
        )),
        "template-variables",
      ),
      el("h3", {}, "Preview (the draft, rendered as a send would)"),
      el("form", { class: "inline", "data-testid": "template-preview-form", onsubmit: submitTo(show) }, inputs, el("button", { type: "submit" }, "Render")),
      el("div", {}),
      preview);
    await show(new FormData(/** @type {HTMLFormElement} */ (where.querySelector("form"))));
  } catch (e) { showError(where, e); }
}

/* ---------- received mail ---------- */

export async function received() {
  const root = $("view-received");
  const list = await api("/emails/receiving?limit=100");
  const detail = el("div", { id: "received-detail" });
  root.replaceChildren(
    el("h2", {}, "Received mail (this key's tenant)"),
    table(["received", "from", "to", "subject", "attachments"], list.data.map((m) => el("tr", { "data-testid": "received-row" },
      el(
        "td", {}, fmtTime(m.created_at),
      ), el("td", {}, m.from), el(
        "td", {}, m.received_for.join(", "),
      ), el("td", {}, link(m.subject || "(no subject)", () => showReceived(detail, m.id))), el("td", { class: "num" }, m.attachments.length))), "received"),
    detail);
}

async function showReceived(where, id) {
  try {
    const [m, files] = await Promise.all([api("/emails/receiving/" + enc(id) + "?html_format=cid"), api("/emails/receiving/" + enc(id) + "/attachments")]);
    where.replaceChildren(
      el("h2", {}, m.subject || "(no subject)"),
      el(
        "p", {}, "From ", el("b", {}, m.from), " · to ", m.to.join(", "), " · received ", fmtTime(m.created_at),
        m.raw ? el("span", {}, " · ", el("a", { href: m.raw.download_url, "data-testid": "received-raw" }, "raw message")) : "",
      ),
      el("pre", { class: "resp", "data-testid": "received-text" }, m.text || "(no text part)"),
      el("h3", {}, "Attachments"),
      table(["file", "type", "size", ""], files.data.map((a) => el("tr", { "data-testid": "received-attachment" },
        el(
          "td", {}, a.filename || "(unnamed)",
        ), el(
          "td", {}, a.content_type,
        ), el("td", { class: "num" }, a.size), el("td", {}, el("a", { href: a.download_url }, "download")))), "received-attachments"));
  } catch (e) { showError(where, e); }
}
`;
