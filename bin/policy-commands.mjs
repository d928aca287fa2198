// @ts-check
/**
 * cohort's operator commands on delivery policy: suspensions (suspend, resume, suspensions),
 * provider rules (providers, provider-set, provider-delete), pickup policies (policies,
 * policy-set) and IP warm-up plans (warmup, warmup-advance). bin/cohort.mjs hands these
 * commands to policyCommand().
 *
 * EXIT STATUS
 *   As cohort.mjs: 0 success, 1 an API error (thrown by `call`), 2 bad usage (UsageError).
 */
import { readFile } from "node:fs/promises";
import { UsageError } from "./client.mjs";
import { textTable } from "./format.mjs";

/** Parses "90", "90s", "15m", "1h", "2d" into seconds. */
export function parseTtl(text) {
  const m = /^(\d+)\s*([smhd]?)$/.exec(String(text).trim());
  if (!m) throw new UsageError(`bad --ttl ${JSON.stringify(text)}: expected e.g. 90s, 15m, 1h or 2d`);
  const n = Number(m[1]) * { "": 1, s: 1, m: 60, h: 3600, d: 86400 }[m[2] ?? ""];
  if (n <= 0) throw new UsageError("--ttl must be positive");
  return n;
}

/** All of standard input, as text. */
async function readStdin() {
  const chunks = [];
  for await (const c of process.stdin) chunks.push(c);
  return Buffer.concat(chunks).toString("utf8");
}

/**
 * Runs one of these commands; null when `command` is not one of them.
 * @param {string} command @param {string[]} args @param {Record<string, any>} values
 * @param {(method: string, path: string, body?: unknown) => Promise<any>} call @param {(json: unknown, text: string) => void} print
 */
export async function policyCommand(command, args, values, call, print) {
  switch (command) {
    case "suspend": {
      const [target, name] = args;
      if (!target || !name || !values.ttl)
        throw new UsageError(
          "usage: cohort suspend <destination|tenant|transport|site|egress> <name> --ttl 1h [--transport T]",
        );
      const r = await call("POST", "/relay/suspensions", {
        target,
        name,
        ttl_seconds: parseTtl(values.ttl),
        ...(values.transport ? { transport: values.transport } : {}),
      });
      print(r, `suspended ${r.key} until ${r.until} (in ${r.transports.join(", ")})`);
      return 0;
    }
    case "resume": {
      const [target, name] = args;
      if (!target || !name)
        throw new UsageError("usage: cohort resume <destination|tenant|transport|site|egress> <name> [--transport T]");
      const qs = values.transport ? `?transport=${encodeURIComponent(values.transport)}` : "";
      const r = await call(
        "DELETE",
        `/relay/suspensions/${encodeURIComponent(target)}/${encodeURIComponent(name)}${qs}`,
      );
      print(r, `resumed ${r.key}`);
      return 0;
    }
    case "suspensions": {
      const r = await call("GET", "/relay/suspensions");
      print(
        r,
        r.data.length
          ? textTable(
              ["key", "until", "set by", "transports"],
              r.data.map((s) => [s.key, s.until, s.set_by ?? "operator", s.transports.join(",")]),
            )
          : "no suspensions",
      );
      return 0;
    }
    case "providers": {
      const r = await call("GET", "/relay/providers");
      const shape = (p) =>
        [
          p.window?.initial !== undefined || p.window?.limit !== undefined
            ? `window ${p.window.initial ?? "-"}..${p.window.limit ?? "-"}`
            : "",
          p.messages_per_session ? `${p.messages_per_session} msgs/session` : "",
          p.recipients_per_message ? `${p.recipients_per_message} rcpts/msg` : "",
          p.rate ? `rate ${p.rate}` : "",
          p.require_tls ? "TLS required" : "",
        ]
          .filter(Boolean)
          .join(", ");
      print(
        r,
        r.data.length
          ? textTable(
              ["name", "mx suffixes", "shape"],
              r.data.map((p) => [p.name, p.mx.join(" "), shape(p)]),
            )
          : "no provider rules",
      );
      return 0;
    }
    case "provider-set": {
      const [name] = args;
      if (!name || !values.file)
        throw new UsageError("usage: cohort provider-set <name> --file rule.json (- for stdin)");
      const text = values.file === "-" ? await readStdin() : await readFile(values.file, "utf8");
      let rule;
      try {
        rule = JSON.parse(text);
      } catch {
        throw new UsageError(`${values.file} is not JSON`);
      }
      const r = await call("PUT", `/relay/providers/${encodeURIComponent(name)}`, rule);
      print(r, `provider rule ${r.name} set: ${r.mx.join(" ")}`);
      return 0;
    }
    case "provider-delete": {
      const [name] = args;
      if (!name) throw new UsageError("usage: cohort provider-delete <name>");
      const r = await call("DELETE", `/relay/providers/${encodeURIComponent(name)}`);
      print(r, `provider rule ${r.name} deleted`);
      return 0;
    }
    case "policies": {
      const r = await call("GET", "/relay/policies");
      const limits = (p) =>
        [
          p.concurrency !== null ? `concurrency ${p.concurrency}` : "",
          p.rate ? `rate ${p.rate}` : "",
          p.interval_seconds !== null ? `interval ${p.interval_seconds}s` : "",
          p.suspended_until ? `suspended until ${p.suspended_until}` : "",
          p.throttle ? `throttled to ${p.throttle.rate} until ${p.throttle.until}` : "",
        ]
          .filter(Boolean)
          .join(", ");
      print(
        r,
        r.data.length
          ? textTable(
              ["transport", "key", "limits", "set by"],
              r.data.map((p) => [p.transport, p.key, limits(p), p.set_by ?? "operator"]),
            )
          : "no pickup policies",
      );
      return 0;
    }
    case "policy-set": {
      const [pkey] = args;
      if (!pkey)
        throw new UsageError(
          "usage: cohort policy-set <key> [--concurrency N] [--rate 300/m] [--connect-interval 10] (none: remove the key's limits)",
        );
      const num = (v, name) => {
        if (v === undefined) return undefined;
        const n = Number(v);
        if (!Number.isInteger(n) || n < 1) throw new UsageError(`--${name} must be a positive integer`);
        return n;
      };
      const body = {
        concurrency: num(values.concurrency, "concurrency") ?? null,
        rate: values.rate ?? null,
        interval_seconds: num(values["connect-interval"], "connect-interval") ?? null,
      };
      const r = await call("PUT", `/relay/policies/${encodeURIComponent(pkey)}`, body);
      print(
        r,
        r.data.length ? `${pkey}: set in ${r.data.map((p) => p.transport).join(", ")}` : `${pkey}: no limits left`,
      );
      return 0;
    }
    case "warmup": {
      const r = await call("GET", "/relay/warmup");
      const caps = (w) =>
        Object.entries(w.caps_today)
          .map(([p, c]) => `${p} ${c.per_day}/d ${c.per_hour}/h`)
          .join(", ") || "none (done)";
      print(
        r,
        r.data.length
          ? textTable(
              ["egress", "day", "caps today"],
              r.data.map((w) => [w.egress, `${w.day} of ${w.days}`, caps(w)]),
            )
          : "no warm-up plans",
      );
      return 0;
    }
    case "warmup-advance": {
      const [egress] = args;
      if (!egress) throw new UsageError("usage: cohort warmup-advance <egress> [--days N]");
      const days = values.days === undefined ? 1 : Number(values.days);
      if (!Number.isInteger(days)) throw new UsageError("--days must be an integer");
      const r = await call("POST", `/relay/warmup/${encodeURIComponent(egress)}/advance`, { days });
      print(r, `${r.egress}: day ${r.day} of ${r.days}${r.done ? " (done: nothing capped)" : ""}`);
      return 0;
    }
    default:
      return null;
  }
}
