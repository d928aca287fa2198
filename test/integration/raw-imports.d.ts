/** Vite's `?raw` imports (the migration test reads a migration's SQL). */
declare module "*.sql?raw" {
  const text: string;
  export default text;
}

/** The inbound fixtures (test/fixtures/inbound), read as text. */
declare module "*.eml?raw" {
  const text: string;
  export default text;
}

/** parse-prometheus-text-format (npm) ships no types: what the /metrics test reads of its answer. */
declare module "parse-prometheus-text-format" {
  interface ParsedFamily {
    name: string;
    help: string;
    type: "GAUGE" | "COUNTER" | "SUMMARY" | "HISTOGRAM" | "UNTYPED";
    metrics: { labels?: Record<string, string>; value: string }[];
  }
  export default function parsePrometheusTextFormat(text: string): ParsedFamily[];
}

/** wrangler.toml, read as text (the meter's coverage test lists its bindings). */
declare module "*.toml?raw" {
  const text: string;
  export default text;
}
