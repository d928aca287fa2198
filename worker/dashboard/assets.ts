/**
 * The dashboard's static files, embedded as text so the worker serves them with no build step
 * and no CDN: index.html (login form and view sections), app.css, and the ES modules app.js
 * (plain browser JavaScript: reads the JSON API with the operator's key, renders with the DOM
 * and SVG), lib.js (its helpers), views-resend.js and views-settings.js (more views).
 *
 * INVARIANTS
 *   The files hold no data and no key; everything shown is fetched by app.js with the key the
 *   operator pasted. app.js builds the page with textContent only (never HTML from data).
 *   The texts are String.raw literals: they must not contain a backtick or a dollar-brace.
 */

/** index.html */
export const INDEX_HTML = String.raw`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Cohort relay — operator dashboard</title>
<link rel="stylesheet" href="/relay/dashboard/app.css">
</head>
<body>
<header>
  <h1>Cohort relay</h1>
  <nav id="nav" hidden>
    <a href="#overview">Overview</a>
    <a href="#destinations">Destinations</a>
    <a href="#messages">Messages</a>
    <a href="#webhooks">Webhooks</a>
    <a href="#suppressions">Suppressions</a>
    <a href="#domains">Domains</a>
    <a href="#keys">API keys</a>
    <a href="#templates">Templates</a>
    <a href="#received">Received</a>
    <a href="#settings">Settings</a>
  </nav>
  <button id="logout" type="button" hidden>Sign out</button>
</header>
<main>
  <section id="login">
    <form id="login-form">
      <label for="key">Operator API key</label>
      <input id="key" name="key" type="password" autocomplete="off" required placeholder="co_…">
      <button type="submit">Sign in</button>
      <p class="muted">The key stays in this tab (sessionStorage) and is sent only to this relay's API.</p>
      <p id="login-error" class="error" role="alert"></p>
    </form>
  </section>
  <section id="view-overview" hidden></section>
  <section id="view-destinations" hidden></section>
  <section id="view-messages" hidden></section>
  <section id="view-webhooks" hidden></section>
  <section id="view-suppressions" hidden></section>
  <section id="view-domains" hidden></section>
  <section id="view-keys" hidden></section>
  <section id="view-templates" hidden></section>
  <section id="view-received" hidden></section>
  <section id="view-settings" hidden></section>
</main>
<script type="module" src="/relay/dashboard/app.js"></script>
</body>
</html>
`;

/** app.css */
export const APP_CSS = String.raw`:root { font: 14px/1.4 system-ui, sans-serif; color: #1a202c; background: #f7fafc; }
body { margin: 0; }
[hidden] { display: none !important; }
header { display: flex; gap: 1rem; align-items: center; padding: .5rem 1rem; background: #1a365d; color: #fff; }
header h1 { font-size: 1.1rem; margin: 0; }
header nav { display: flex; gap: .25rem; }
header nav a { color: #cbd5e0; text-decoration: none; padding: .25rem .6rem; border-radius: 4px; }
header nav a[aria-current="page"] { background: #2c5282; color: #fff; }
header #logout { margin-left: auto; }
main { padding: 1rem; max-width: 1200px; }
h2 { font-size: 1rem; margin: 1.2rem 0 .4rem; }
h3 { font-size: .95rem; margin: 1rem 0 .4rem; }
.cards { display: flex; flex-wrap: wrap; gap: .5rem; }
.card { background: #fff; border: 1px solid #e2e8f0; border-radius: 6px; padding: .4rem .7rem; min-width: 5.5rem; }
.card .label { color: #718096; font-size: .8rem; }
.card .value { font-size: 1.25rem; font-weight: 600; }
table { border-collapse: collapse; background: #fff; width: 100%; margin-bottom: .5rem; }
th, td { border: 1px solid #e2e8f0; padding: .2rem .45rem; text-align: left; vertical-align: top; }
th { background: #edf2f7; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.empty { color: #a0aec0; text-align: center; }
.resp { font-family: ui-monospace, monospace; font-size: .85rem; }
.muted { color: #718096; }
.error { color: #c53030; font-weight: 600; }
.toolbar { display: flex; gap: .5rem; align-items: center; margin: .5rem 0; }
form.inline { display: flex; flex-wrap: wrap; gap: .4rem; margin: .5rem 0; }
input, select, button { font: inherit; padding: .25rem .5rem; }
.chart { width: 100%; max-width: 760px; background: #fff; border: 1px solid #e2e8f0; }
.chart .axis { font-size: 10px; fill: #4a5568; }
.legend { display: flex; gap: 1rem; margin: .3rem 0; }
.legend i { display: inline-block; width: .8rem; height: .8rem; margin-right: .3rem; vertical-align: middle; }
.timeline { background: #fff; border: 1px solid #e2e8f0; padding: .5rem 2rem; }
.timeline li { margin: .2rem 0; }
#login { max-width: 28rem; margin: 3rem auto; background: #fff; padding: 1.5rem; border: 1px solid #e2e8f0; border-radius: 8px; }
#login input { width: 100%; box-sizing: border-box; margin: .5rem 0; }
iframe.preview { width: 100%; max-width: 760px; height: 240px; background: #fff; border: 1px solid #e2e8f0; }
pre.resp { white-space: pre-wrap; background: #fff; border: 1px solid #e2e8f0; padding: .5rem; }
`;

export { APP_JS } from "./app-js";
export { LIB_JS } from "./lib-js";
export { VIEWS_RESEND_JS } from "./views-resend-js";
export { VIEWS_SETTINGS_JS } from "./views-settings-js";
