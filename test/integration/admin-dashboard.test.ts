/**
 * The dashboard's static files: served without a key (they hold no data), with a strict CSP;
 * every data call the page makes needs the key.
 */
import { describe, expect, it } from "vitest";
import { call } from "./helpers";

describe("GET /relay/dashboard", () => {
  it.each([
    { name: "the page", path: "/relay/dashboard", type: "text/html", has: 'id="login-form"' },
    {
      name: "the page with a trailing slash",
      path: "/relay/dashboard/",
      type: "text/html",
      has: "/relay/dashboard/app.js",
    },
    { name: "the script", path: "/relay/dashboard/app.js", type: "text/javascript", has: "sessionStorage" },
    { name: "the style sheet", path: "/relay/dashboard/app.css", type: "text/css", has: ".chart" },
    {
      name: "the helpers module",
      path: "/relay/dashboard/lib.js",
      type: "text/javascript",
      has: "export async function api",
    },
    {
      name: "the views of Resend's resources",
      path: "/relay/dashboard/views-resend.js",
      type: "text/javascript",
      has: "/emails/receiving",
    },
    {
      name: "the settings view",
      path: "/relay/dashboard/views-settings.js",
      type: "text/javascript",
      has: "/relay/warmup",
    },
  ])("serves $name without an API key, with a same-origin-only CSP", async ({ path, type, has }) => {
    const res = await call(path);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain(type);
    expect(res.headers.get("content-security-policy")).toContain("script-src 'self'");
    expect(res.headers.get("content-security-policy")).toContain("connect-src 'self'");
    const body = await res.text();
    expect(body).toContain(has);
    expect(body).not.toMatch(/https?:\/\/(?!www\.w3\.org\/2000\/svg)/); // no CDN or other origin
  });

  it("serves nothing else under /relay/dashboard without a key, and no data at all", async () => {
    expect((await call("/relay/dashboard/other.js")).status).toBe(401);
    expect((await call("/relay/dashboard", { method: "POST" })).status).toBe(401);
    expect((await call("/relay/queue")).status).toBe(401);
  });
});
