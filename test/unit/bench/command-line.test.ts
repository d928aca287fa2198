import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { afterEach, describe, expect, it, vi } from "vitest";
import { argumentError, commandLine, usageOf } from "../../../scripts/lib/command-line";

describe("command line of the benchmarks and scripts", () => {
  let dir = "";
  afterEach(async () => {
    vi.restoreAllMocks();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  async function script(text: string): Promise<string> {
    dir = await mkdtemp(join(tmpdir(), "cohort-cli-"));
    const file = join(dir, "tool.ts");
    await writeFile(file, text);
    return pathToFileURL(file).href;
  }

  /** process.exit made to throw, so the call under test stops where the command would. */
  function exits() {
    const out = { log: "", err: "" };
    vi.spyOn(process, "exit").mockImplementation((code?: string | number | null) => {
      throw new Error(`exit ${code}`);
    });
    vi.spyOn(console, "log").mockImplementation((s: string) => void (out.log += s));
    vi.spyOn(console, "error").mockImplementation((s: string) => void (out.err += s));
    return out;
  }

  const parse = (argv: string[]) => () => parseArgs({ args: argv, options: { json: { type: "boolean" } } });

  it("prints the header the file opens with (either comment style), not a later doc comment", async () => {
    const url = await script(
      "#!/usr/bin/env node\n/*\n * npm run tool [-- --json]\n *\n * What it does.\n */\n/** not this */\n",
    );
    expect(usageOf(url)).toBe("npm run tool [-- --json]\n\nWhat it does.");
    const url2 = await script("/**\n * npm run other\n */\nconst x = 1;\n");
    expect(usageOf(url2)).toBe("npm run other");
  });

  it("--help and -h print the usage and exit 0 before parsing", async () => {
    const url = await script("/**\n * npm run tool [-- --json]\n */\n");
    for (const flag of ["--help", "-h"]) {
      const out = exits();
      expect(() => commandLine(url, parse(["--bogus"]), [flag])).toThrow("exit 0");
      expect(out.log).toBe("npm run tool [-- --json]");
      vi.restoreAllMocks();
    }
  });

  it("an argument parseArgs refuses is one line naming the command, and exit 2", async () => {
    const url = await script("/**\n * npm run tool\n */\n");
    const out = exits();
    expect(() => commandLine(url, parse(["--bogus"]), ["--bogus"])).toThrow("exit 2");
    expect(out.err).toMatch(/^tool\.ts: Unknown option '--bogus'\n\(--help lists the options\)$/);
  });

  it("returns what parse gives, and lets any other error through", async () => {
    const url = await script("/**\n * npm run tool\n */\n");
    expect(commandLine(url, parse(["--json"]), ["--json"]).values.json).toBe(true);
    expect(() =>
      commandLine(url, () => {
        throw new Error("a bug");
      }, []),
    ).toThrow("a bug");
  });

  it("a value the command refuses (argumentError) is one line and exit 2 too", async () => {
    const url = await script("/**\n * npm run tool\n */\n");
    const out = exits();
    expect(() =>
      commandLine(url, () => {
        throw argumentError("--rungs takes d1, hops and sql, not foo");
      }, []),
    ).toThrow("exit 2");
    expect(out.err).toBe("tool.ts: --rungs takes d1, hops and sql, not foo\n(--help lists the options)");
  });
});
