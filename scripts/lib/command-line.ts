/**
 * The command line of the benchmarks, campaigns and scripts: `--help` prints the command's own
 * header (the usage it documents), and an option parseArgs refuses is a one-line error, not a
 * stack trace.
 *
 * DESCRIPTION
 *   commandLine(fileUrl, parse, argv?)  with -h or --help in argv (default: process.argv after
 *       the script), prints usageOf(fileUrl) and exits 0; else returns parse() (node:util's
 *       parseArgs with the command's options). When parseArgs refuses the arguments (an unknown
 *       option, a missing value, a stray positional), prints "<command>: <reason>" and a pointer to
 *       --help on stderr and exits 2.
 *   usageOf(fileUrl)  the text of the file's header (the comment block it opens with), without
 *       its comment marks.
 *   argumentError(message)  an error commandLine reports as it reports parseArgs' own: for a
 *       value parseArgs took but the command refuses (thrown inside `parse`).
 */
import { readFileSync } from "node:fs";
import { basename } from "node:path";
import { fileURLToPath } from "node:url";

/** The file's opening comment block (its header), the leading " * " of every line removed. */
export function usageOf(fileUrl: string): string {
  const text = readFileSync(fileURLToPath(fileUrl), "utf8");
  const block = /^(?:#!.*\n)?\s*\/\*\*?([\s\S]*?)\*\//.exec(text)?.[1] ?? "";
  return block
    .split("\n")
    .map((l) => l.replace(/^\s*\* ?/, ""))
    .join("\n")
    .trim();
}

/** Whether a parseArgs error is about the arguments (not a bug of the caller's config). */
function isArgumentError(e: unknown): e is Error {
  const code = (e as { code?: unknown } | null)?.code;
  return e instanceof Error && typeof code === "string" && code.startsWith("ERR_PARSE_ARGS_");
}

/** See the header. */
export function argumentError(message: string): Error {
  return Object.assign(new Error(message), { code: "ERR_PARSE_ARGS_INVALID_OPTION_VALUE" });
}

/** See the header. */
export function commandLine<R>(fileUrl: string, parse: () => R, argv: readonly string[] = process.argv.slice(2)): R {
  if (argv.includes("--help") || argv.includes("-h")) {
    console.log(usageOf(fileUrl));
    process.exit(0);
  }
  try {
    return parse();
  } catch (e) {
    if (!isArgumentError(e)) throw e;
    console.error(`${basename(fileURLToPath(fileUrl))}: ${e.message}\n(--help lists the options)`);
    process.exit(2);
  }
}
