/**
 * bench:mix's command line (bench/mix.ts's header lists it): parsed with commandLine, so a value
 * it refuses is a one-line error and exit 2, as an unknown option is.
 *
 * DESCRIPTION
 *   mixArgs(fileUrl)  { values, CFG, VARS }: the options, the run's sizes and rates (the CI
 *                     defaults with --ci), and the relay's --var overrides (NAME=value).
 */
import { parseArgs } from "node:util";
import { argumentError, commandLine } from "../../scripts/lib/command-line";

export function mixArgs(fileUrl: string) {
  return commandLine(fileUrl, () => {
    const { values } = parseArgs({
      options: {
        domains: { type: "string" },
        sustained: { type: "string" },
        saturation: { type: "string" },
        rate: { type: "string" },
        "saturation-rate": { type: "string" },
        metered: { type: "string" },
        "metered-phase": { type: "string", default: "sustained" },
        only: { type: "string" },
        seed: { type: "string", default: "41" },
        var: { type: "string", multiple: true, default: [] },
        floor: { type: "boolean", default: false },
        rungs: { type: "string", default: "" },
        profile: { type: "boolean", default: false },
        ci: { type: "boolean", default: false },
        json: { type: "boolean", default: false },
      },
    });
    const num = (name: string, v: string | undefined, def: number) => {
      const n = v === undefined ? def : Number(v);
      if (!Number.isFinite(n) || n < 0) throw argumentError(`--${name} takes a number of at least 0, not ${v}`);
      return n;
    };
    const ci = values.ci;
    const CFG = {
      domains: num("domains", values.domains, ci ? 300 : 2000),
      sustained: num("sustained", values.sustained, ci ? 300 : 2500),
      saturation: num("saturation", values.saturation, ci ? 300 : 2500),
      rate: values.rate === undefined || values.rate === "auto" ? null : num("rate", values.rate, 0),
      saturationRate: num("saturation-rate", values["saturation-rate"], 400),
      metered: num("metered", values.metered, ci ? 0 : 1000),
      seed: num("seed", values.seed, 41),
      meteredPhase: values["metered-phase"],
    };
    for (const r of values.rungs.split(",").filter(Boolean))
      if (!["d1", "hops", "sql"].includes(r)) throw argumentError(`--rungs takes d1, hops and sql, not ${r}`);
    if (CFG.meteredPhase !== "sustained" && CFG.meteredPhase !== "saturation")
      throw argumentError(`--metered-phase is sustained or saturation, not ${CFG.meteredPhase}`);
    if (values.only !== undefined && !["relay", "floor", "postfix"].includes(values.only))
      throw argumentError(`--only is relay, floor or postfix, not ${values.only}`);
    // The sustained rate is half the relay's saturation rate: without the relay it must be given.
    if (values.only !== undefined && values.only !== "relay" && CFG.rate === null)
      throw argumentError(`--only ${values.only} needs --rate (the relay's saturation rate sets it otherwise)`);
    const VARS: Record<string, string> = Object.fromEntries(
      values.var.map((kv) => {
        const eq = kv.indexOf("=");
        if (eq < 1) throw argumentError(`--var needs NAME=value, not ${kv}`);
        return [kv.slice(0, eq), kv.slice(eq + 1)];
      }),
    );
    return { values, CFG, VARS };
  });
}
