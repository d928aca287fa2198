import { describe, expect, it } from "vitest";
import { mergeResults, type CampaignResult } from "../../chaos/lib/report";

const result = (campaign: string, r: Partial<CampaignResult> = {}): CampaignResult => ({
  campaign,
  tried: `tried ${campaign}`,
  result: "pass",
  figures: `figures ${campaign}`,
  failures: [],
  details: {},
  ...r,
});

describe("the results block of docs/reliability.md", () => {
  it("keeps the rows of campaigns that were not rerun and replaces the others", () => {
    const first = mergeResults(
      "",
      [result("crash"), result("faults", { result: "fail", failures: ["x broke"], table: "| a |\n|---|\n| 1 |" })],
      "full, seed 1",
    );
    const second = mergeResults(first, [result("faults"), result("fuzz", { figures: "a | b" })], "--quick, seed 2");
    expect(second).toContain("| crash | full, seed 1 | tried crash | PASS | figures crash |");
    expect(second).toContain("| faults | --quick, seed 2 | tried faults | PASS | figures faults |");
    expect(second).toContain("| fuzz | --quick, seed 2 | tried fuzz | PASS | a \\| b |");
    expect(second).not.toContain("x broke");
    expect(second).not.toContain("chaos:detail:faults");
  });

  it("lists failures and detail tables, campaigns in a fixed order", () => {
    const text = mergeResults(
      "",
      [result("load", { result: "fail", failures: ["slow"] }), result("crash", { table: "| t |" })],
      "full, seed 3",
    );
    expect(text.indexOf("| crash |")).toBeLessThan(text.indexOf("| load |"));
    expect(text).toContain("- load: slow");
    expect(text).toMatch(
      /<!-- chaos:detail:crash -->\n\*\*crash\*\* \(full, seed 3\)\n\n\| t \|\n<!-- \/chaos:detail:crash -->/,
    );
    expect(mergeResults(text, [], "x")).toBe(text);
  });
});
