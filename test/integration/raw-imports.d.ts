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

/** wrangler.toml, read as text (the meter's coverage test lists its bindings). */
declare module "*.toml?raw" {
  const text: string;
  export default text;
}
