/**
 * The meter's boundary (worker/meter/meter.ts): no module reaches billable storage around it.
 *
 * THE RULE
 *   Raw Durable Object storage can only be had from a DurableObjectState, and the only
 *   DurableObjectState objects the code ever holds are the constructor arguments of its Durable
 *   Object classes. So the meter sees every storage operation if:
 *   1. every `class X extends DurableObject` begins its constructor with exactly
 *        constructor(ctx: DurableObjectState, env: Env) {
 *          super(ctx, env);
 *          ({ ctx, env } = meterObject(this, "X"));
 *      (the real state goes only to super, which workerd insists on; from the next statement on
 *      `ctx`, `this.ctx`, `env` and `this.env` are the metered ones) and its alarm(), if any,
 *      begins with meterAlarm("X");
 *   2. `DurableObjectState` appears nowhere else (no other code can hold a raw state);
 *   3. `.storage` is reached only as `this.ctx.storage` inside such a class or `ctx.storage`
 *      after the meterObject line, and `x.storage.sql`/`x.sql` handles are only passed on from
 *      there: a bare `storage.sql` is allowed only on a parameter typed DurableObjectStorage;
 *   4. worker/index.ts's handlers hand their env to the Worker only through the meter: the env
 *      parameter of `fetch`, `queue` and `scheduled` appears exactly once in the handler, as the
 *      argument of meterFetch, meterQueue or meterScheduled respectively.
 *   D1, R2, queues and DO stubs come from the env, which rules 1 and 4 make the metered one.
 *   Files under core/ directories (pure) and the meter itself are not scanned. Comments are.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("../../..", import.meta.url));

function sources(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) {
      if (name !== "core") out.push(...sources(path));
    } else if (name.endsWith(".ts")) out.push(path);
  }
  return out;
}

/** Source without comments (block comments and `//` comments that start a line or follow a space). */
function stripComments(text: string): string {
  return text.replace(/\/\*[\s\S]*?\*\//g, (m) => m.replace(/[^\n]/g, " ")).replace(/(^|\s)\/\/.*$/gm, "$1");
}

const lineOf = (text: string, i: number) => text.slice(0, i).split("\n").length;

/** Violations of rules 1–3 in one module's source. */
export function scanModule(path: string, source: string): string[] {
  const text = stripComments(source);
  const out: string[] = [];
  // Where each compliant class's metered part starts and ends (from the meterObject line to the next class or EOF).
  const metered: [number, number][] = [];
  const classes = [...text.matchAll(/class\s+(\w+)\s+extends\s+DurableObject\b/g)];
  classes.forEach((m, k) => {
    const name = m[1]!;
    const end = classes[k + 1]?.index ?? text.length;
    const body = text.slice(m.index, end);
    const ctor = new RegExp(String.raw`constructor\s*\(\s*ctx\s*:\s*DurableObjectState\s*,\s*env\s*:\s*Env\s*\)\s*\{\s*super\s*\(\s*ctx\s*,\s*env\s*\)\s*;\s*\(\s*\{\s*ctx\s*,\s*env\s*\}\s*=\s*meterObject\s*\(\s*this\s*,\s*"${name}"\s*\)\s*\)\s*;`).exec(body);
    if (!ctor) {
      out.push(`${path}:${lineOf(text, m.index)}: ${name}'s constructor does not start with super(ctx, env); ({ ctx, env } = meterObject(this, "${name}"));`);
      return;
    }
    metered.push([m.index + ctor.index + ctor[0].length, end]);
    const alarm = /\basync\s+alarm\s*\([^)]*\)\s*(?::\s*Promise<void>\s*)?\{\s*(meterAlarm\s*\(\s*"(\w+)"\s*\)\s*;)?/.exec(body);
    if (alarm && alarm[2] !== name) out.push(`${path}:${lineOf(text, m.index + alarm.index)}: ${name}.alarm() does not start with meterAlarm("${name}")`);
  });
  const inMetered = (i: number) => metered.some(([a, b]) => i >= a && i < b);
  const ctors = metered.length;
  for (const m of text.matchAll(/\bDurableObjectState\b/g)) {
    // The one allowed place per compliant class: its constructor's parameter.
    const before = text.slice(Math.max(0, m.index - 40), m.index);
    if (!(ctors > 0 && /constructor\s*\(\s*ctx\s*:\s*$/.test(before))) out.push(`${path}:${lineOf(text, m.index)}: DurableObjectState held outside a metered Durable Object constructor`);
  }
  for (const m of text.matchAll(/([\w$.]*)\.\s*storage\b/g)) {
    const obj = m[1]!;
    const ok = inMetered(m.index) && (obj === "this.ctx" || obj === "ctx");
    if (!ok) out.push(`${path}:${lineOf(text, m.index)}: ${obj}.storage is reached outside the metered ctx of a Durable Object`);
  }
  const storageParams = new Set([...text.matchAll(/(\w+)\s*:\s*DurableObjectStorage\b/g)].map((m) => m[1]!));
  for (const m of text.matchAll(/(?<![\w$.])(\w+)\s*\.\s*sql\b/g)) {
    const id = m[1]!;
    if (id === "this" || id === "ctx") continue;
    if (/storage/i.test(id) && !storageParams.has(id)) out.push(`${path}:${lineOf(text, m.index)}: ${id}.sql on storage that is not a DurableObjectStorage parameter`);
  }
  return out;
}

/** Violations of rule 4 in worker/index.ts's source. */
export function scanEntry(path: string, source: string): string[] {
  const text = stripComments(source);
  const out: string[] = [];
  const wrap: Record<string, string> = { fetch: "meterFetch", queue: "meterQueue", scheduled: "meterScheduled", email: "meterEmail" };
  const handlers = [...text.matchAll(/^\s*(fetch|queue|scheduled|email|tail|trace)\s*:\s*(?:async\s*)?\(([^)]*)\)\s*=>/gm)];
  for (const h of ["fetch", "queue", "scheduled"]) if (!handlers.some((m) => m[1] === h)) out.push(`${path}: no ${h} handler found (the scanner expects arrow-function handlers)`);
  handlers.forEach((m, k) => {
    const kind = m[1]!;
    const params = m[2]!.split(",").map((p) => p.trim().split(/\s*:/)[0]!);
    const env = kind === "scheduled" || kind === "fetch" || kind === "queue" || kind === "email" ? params[1] : undefined;
    if (!wrap[kind]) return void out.push(`${path}:${lineOf(text, m.index)}: ${kind} handler is not metered`);
    const end = handlers[k + 1]?.index ?? text.indexOf("satisfies ExportedHandler", m.index);
    const body = text.slice(m.index + m[0].length, end < 0 ? text.length : end);
    const uses = env ? [...body.matchAll(new RegExp(String.raw`(?<![\w$.])${env}(?![\w$])`, "g"))] : [];
    const wrapped = env ? new RegExp(String.raw`\b${wrap[kind]}\s*\(\s*${kind === "scheduled" || kind === "email" ? "" : String.raw`\w+\s*,\s*`}${env}\s*[,)]`).test(body) : false;
    if (!wrapped || uses.length !== 1) out.push(`${path}:${lineOf(text, m.index)}: the ${kind} handler's env must appear once, as the argument of ${wrap[kind]}() (found ${uses.length} uses)`);
  });
  return out;
}

describe("the meter boundary", () => {
  it("holds in every Worker and Durable Object module", () => {
    const files = [...sources(join(root, "worker")), ...sources(join(root, "durable-objects"))]
      .filter((f) => !relative(root, f).startsWith(join("worker", "meter") + "/"));
    const bad = files.flatMap((f) => scanModule(relative(root, f), readFileSync(f, "utf8")));
    bad.push(...scanEntry("worker/index.ts", readFileSync(join(root, "worker/index.ts"), "utf8")));
    expect(bad).toEqual([]);
  });

  it("finds each Durable Object class among the scanned files", () => {
    const text = ["durable-objects/outbox/outbox", "durable-objects/transport/transport-queue", "durable-objects/destination/destination-queue", "worker/delivery/delivery-agent"]
      .map((f) => readFileSync(join(root, `${f}.ts`), "utf8")).join("\n");
    expect([...text.matchAll(/meterObject\(this, "(\w+)"\)/g)].map((m) => m[1])).toEqual(["Outbox", "TransportQueue", "DestinationQueue", "DeliveryAgent"]);
  });

  const good = `
export class Box extends DurableObject<Env> {
  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    ({ ctx, env } = meterObject(this, "Box"));
    const sql = ctx.storage.sql;
  }
  override async alarm(): Promise<void> {
    meterAlarm("Box");
    this.ctx.storage.sql.exec("SELECT 1");
  }
}
export function helper(storage: DurableObjectStorage) { return storage.sql.exec("SELECT 1"); }
`;

  it.each([
    { name: "a compliant class and a storage helper", src: good, bad: false },
    { name: "a class that keeps the raw ctx", src: good.replace(`    ({ ctx, env } = meterObject(this, "Box"));\n`, ""), bad: true },
    { name: "a class that meters under another class's name", src: good.replace(`meterObject(this, "Box")`, `meterObject(this, "Outbox")`), bad: true },
    { name: "a class that reads storage before metering", src: good.replace(`    super(ctx, env);\n`, `    super(ctx, env);\n    ctx.storage.sql.exec("SELECT 1");\n`), bad: true },
    { name: "an alarm that is not counted", src: good.replace(`    meterAlarm("Box");\n`, ""), bad: true },
    { name: "a module that keeps a state of its own", src: `let saved: DurableObjectState; export function keep(s: DurableObjectState) { saved = s; return s.storage.sql; }`, bad: true },
    { name: "a module that digs storage out of another object", src: `export function peek(o: { state: { storage: DurableObjectStorage } }) { return o.state.storage.sql.exec("SELECT 1"); }`, bad: true },
    { name: "a bare storage.sql on something not a storage parameter", src: `export function peek(rawStorage: any) { return rawStorage.sql.exec("SELECT 1"); }`, bad: true },
  ])("scanModule on $name: violations found = $bad", ({ src, bad }) => {
    const got = scanModule("synthetic.ts", src);
    expect(got.length > 0, JSON.stringify(got)).toBe(bad);
  });

  const entry = `
export default {
  fetch: (request, env, ctx) => app.fetch(request, meterFetch(request, env), ctx),
  queue: (batch, env, _ctx) => meterQueue(batch, env, (b, metered) => handle(b, metered)),
  scheduled: (_controller, env, ctx) => ctx.waitUntil(wakeSweepers(meterScheduled(env))),
} satisfies ExportedHandler<Env>;
`;

  it.each([
    { name: "every handler metered", src: entry, bad: false },
    { name: "fetch with the raw env", src: entry.replace("meterFetch(request, env)", "env"), bad: true },
    { name: "fetch that also leaks the raw env", src: entry.replace("meterFetch(request, env), ctx)", "meterFetch(request, env), ctx, env)"), bad: true },
    { name: "a queue handler around the meter", src: entry.replace("meterQueue(batch, env, (b, metered) => handle(b, metered))", "handle(batch, env)"), bad: true },
    { name: "a scheduled handler with the raw env", src: entry.replace("wakeSweepers(meterScheduled(env))", "wakeSweepers(env)"), bad: true },
  ])("scanEntry on $name: violations found = $bad", ({ src, bad }) => {
    const got = scanEntry("index.ts", src);
    expect(got.length > 0, JSON.stringify(got)).toBe(bad);
  });
});
