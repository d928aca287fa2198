import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const dir = fileURLToPath(new URL("../../../worker/webhooks/core", import.meta.url));

// The functional-core rule (style guide) for the webhooks core, checked the same way as the
// other cores: no Workers or framework imports, clock, randomness, timers, console or network.
const FORBIDDEN: { name: string; re: RegExp }[] = [
  { name: "imports cloudflare:*", re: /from\s+["']cloudflare:/ },
  { name: "imports hono", re: /from\s+["']hono/ },
  { name: "imports node:*", re: /from\s+["']node:/ },
  { name: "reads the clock (Date.now)", re: /Date\.now\(/ },
  { name: "reads the clock (new Date())", re: /new Date\(\s*\)/ },
  { name: "uses Math.random", re: /Math\.random\(/ },
  { name: "uses crypto", re: /\bcrypto\./ },
  { name: "arms a timer", re: /\bsetTimeout\(|\bsetInterval\(/ },
  { name: "logs to the console", re: /\bconsole\./ },
  { name: "does network I/O", re: /\bfetch\(/ },
];

// The endpoint guard (ssrf, ip-address) moved to worker/net/core, where the webhooks, attachment
// paths and every other outbound fetch share it; it is held to the same rules.
const guard = fileURLToPath(new URL("../../../worker/net/core", import.meta.url));
const files = readdirSync(dir).filter((f) => f.endsWith(".ts"));
const checked = [...files.map((f) => join(dir, f)), join(guard, "ssrf.ts"), join(guard, "ip-address.ts")];

describe("worker/webhooks/core stays pure", () => {
  it("has the modules the checks are meant for (not vacuous)", () => {
    expect(files.length).toBeGreaterThanOrEqual(7);
  });

  it.each(checked)("%s uses no Workers API, clock, randomness, timers, console or network", (file) => {
    const text = readFileSync(file, "utf8")
      .replace(/\/\*[\s\S]*?\*\//g, "")
      .replace(/\/\/.*$/gm, "");
    expect(FORBIDDEN.filter(({ re }) => re.test(text)).map(({ name }) => name)).toEqual([]);
  });

  it.each(checked)("%s stays under about 300 lines", (file) => {
    expect(readFileSync(file, "utf8").split("\n").length).toBeLessThanOrEqual(300);
  });
});
