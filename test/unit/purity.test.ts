import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("../..", import.meta.url));

/** Every .ts file under a directory. */
function sources(dir: string): string[] {
  const out: string[] = [];
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return out;
  }
  for (const name of names) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...sources(path));
    else if (name.endsWith(".ts")) out.push(path);
  }
  return out;
}

// The functional-core rule (style guide): no Workers or HTTP framework imports, no clock,
// no randomness, no timers, no console, no network under any core/ directory.
const FORBIDDEN: [RegExp, string][] = [
  [/from\s+["']cloudflare:/, "imports cloudflare:*"],
  [/from\s+["']hono/, "imports hono"],
  [/from\s+["']node:/, "imports node:*"],
  [/Date\.now\(/, "reads the clock (Date.now)"],
  [/new Date\(\s*\)/, "reads the clock (new Date())"],
  [/Math\.random\(/, "uses Math.random"],
  [/\bsetTimeout\(|\bsetInterval\(/, "arms a timer"],
  [/\bconsole\./, "logs to the console"],
  [/\bfetch\(/, "does network I/O"],
];

describe("pure cores stay pure", () => {
  const cores = [
    "durable-objects/core",
    "worker/smtp/core",
    "worker/net/core",
    "worker/webhooks/core",
    "worker/dashboard/core",
    "worker/templates/core",
    "worker/receiving/core",
    "worker/metrics/core",
    "test/chaos/core",
    "worker/tls-policy/core",
    "worker/compliance/core",
    "worker/egress/core",
    "worker/inbound/core",
    "worker/domains/core",
  ];
  it.each(cores)("%s uses no Workers API, clock, randomness, timers, console or network", (dir) => {
    const problems: string[] = [];
    for (const file of sources(join(root, dir))) {
      const text = readFileSync(file, "utf8")
        .replace(/\/\*[\s\S]*?\*\//g, "")
        .replace(/\/\/.*$/gm, "");
      for (const [re, what] of FORBIDDEN) if (re.test(text)) problems.push(`${file.slice(root.length)}: ${what}`);
    }
    expect(problems).toEqual([]);
  });

  it("checks the scheduling core's files (the check is not vacuous)", () => {
    expect(sources(join(root, "durable-objects/core")).length).toBeGreaterThan(10);
  });
});
