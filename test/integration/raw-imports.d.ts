/** Vite's `?raw` imports (the migration test reads a migration's SQL). */
declare module "*.sql?raw" {
  const text: string;
  export default text;
}
