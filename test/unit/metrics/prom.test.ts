// The Prometheus text format (worker/metrics/core/prom.ts), read back by a Prometheus text parser from npm.
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import parsePrometheusTextFormat from "parse-prometheus-text-format";
import { formatFamilies, replyClass } from "../../../worker/metrics/core/prom";

describe("the text format", () => {
  it("writes HELP and TYPE lines and samples that the parser reads back", () => {
    const text = formatFamilies([
      {
        name: "cohort_x_total",
        help: "A counter\nwith a line feed and a \\.",
        type: "counter",
        samples: [{ labels: { a: "1", b: 'q"uo\\te\nd' }, value: 3 }],
      },
      { name: "cohort_empty", help: "left out", type: "gauge", samples: [] },
      {
        name: "cohort_g",
        help: "g",
        type: "gauge",
        samples: [{ value: 0.5 }, { labels: { k: "v" }, value: Number.NaN }],
      },
    ]);
    expect(text).toBe(
      [
        "# HELP cohort_x_total A counter\\nwith a line feed and a \\\\.",
        "# TYPE cohort_x_total counter",
        'cohort_x_total{a="1",b="q\\"uo\\\\te\\nd"} 3',
        "# HELP cohort_g g",
        "# TYPE cohort_g gauge",
        "cohort_g 0.5",
        'cohort_g{k="v"} NaN',
        "",
      ].join("\n"),
    );
    const parsed = parsePrometheusTextFormat(text);
    expect(parsed.map((f) => [f.name, f.type])).toEqual([
      ["cohort_x_total", "COUNTER"],
      ["cohort_g", "GAUGE"],
    ]);
    expect(parsed[0]!.metrics[0]).toEqual({ labels: { a: "1", b: 'q"uo\\te\nd' }, value: "3" });
  });

  it("any label value survives the round trip through the parser (property)", () => {
    fc.assert(
      fc.property(fc.string(), fc.integer({ min: 0, max: 1e9 }), (v, n) => {
        const parsed = parsePrometheusTextFormat(
          formatFamilies([{ name: "m", help: "h", type: "gauge", samples: [{ labels: { l: v }, value: n }] }]),
        );
        return parsed[0]!.metrics[0]!.labels!.l === v && Number(parsed[0]!.metrics[0]!.value) === n;
      }),
      { numRuns: 200 },
    );
  });

  it("refuses an invalid metric name", () => {
    expect(() => formatFamilies([{ name: "bad-name", help: "", type: "gauge", samples: [{ value: 1 }] }])).toThrow(
      /invalid metric name/,
    );
  });
});

describe("reply classes", () => {
  it("classes replies by the code's first digit and the enhanced status's class and subject", () => {
    expect(replyClass(250, "2.0.0")).toEqual({ code: "2", enhanced: "2.0" });
    expect(replyClass(550, "5.1.1")).toEqual({ code: "5", enhanced: "5.1" });
    expect(replyClass(undefined, "bogus")).toEqual({ code: "none", enhanced: "none" });
  });
});
