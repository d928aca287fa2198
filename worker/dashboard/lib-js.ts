/**
 * The dashboard's lib.js, embedded as text (assets.ts): the helpers every view module imports (DOM
 * and SVG builders that set text only, the API call with the stored key, formatting, tables).
 * A String.raw literal: it must not contain a backtick or a dollar-brace.
 */

/** lib.js */
export const LIB_JS = String.raw`/* Shared helpers of the dashboard's modules (app.js, views-resend.js, views-settings.js). */
/** Where the operator's key is kept (this tab only). */
export const KEY = "cohort.key";
export const $ = (id) => /** @type {HTMLElement} */ (document.getElementById(id));

/** An element with attributes and children (strings become text nodes). */
export function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, String(v));
  }
  for (const c of children.flat()) if (c !== null && c !== undefined) e.append(typeof c === "string" || typeof c === "number" ? String(c) : c);
  return e;
}

/** An SVG element with attributes. */
export function svg(tag, attrs, ...children) {
  const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  for (const c of children) e.append(c);
  return e;
}

export class ApiFailure extends Error {
  constructor(status, body) {
    super((body && body.message) || "HTTP " + status);
    this.status = status;
    this.body = body;
  }
}

/** Calls the JSON API with the stored key. */
export async function api(path, init) {
  const key = sessionStorage.getItem(KEY) || "";
  const headers = { authorization: "Bearer " + key };
  if (init && init.body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(path, { ...(init || {}), headers });
  const body = await res.json().catch(() => null);
  if (!res.ok) throw new ApiFailure(res.status, body);
  return body;
}

export function fmtAge(sec) {
  if (sec === null || sec === undefined) return "—";
  if (sec < 60) return sec + "s";
  if (sec < 3600) return Math.floor(sec / 60) + "m " + (sec % 60) + "s";
  return Math.floor(sec / 3600) + "h " + Math.floor((sec % 3600) / 60) + "m";
}
export const fmtTime = (iso) => (iso ? new Date(iso).toLocaleString() : "—");

export function table(headers, rows, testid) {
  return el("table", { "data-testid": testid },
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", {}, h)))),
    el("tbody", {}, rows.length ? rows : [el("tr", {}, el("td", { colspan: headers.length, class: "empty" }, "nothing"))]));
}

export function card(label, value, testid) {
  return el("div", { class: "card" }, el("div", { class: "label" }, label), el("div", { class: "value", "data-testid": testid }, String(value)));
}

export function showError(where, e) {
  where.replaceChildren(el("p", { class: "error", role: "alert" }, e instanceof Error ? e.message : String(e)));
}
`;
