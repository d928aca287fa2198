import { describe, expect, it } from "vitest";
import {
  createSessionConfig,
  DEFAULT_TIMEOUTS,
  parseSmtpTimeouts,
  TIMEOUT_PARAMS,
} from "../../../worker/smtp/core/config";

describe("SMTP timeouts from configuration (SMTP_TIMEOUTS, Postfix's names)", () => {
  it("reads seconds and Postfix time strings; unset steps keep Postfix's defaults", () => {
    const t = parseSmtpTimeouts({
      smtp_connect_timeout: 10,
      smtp_helo_timeout: "2m",
      smtp_data_done_timeout: "1h",
      smtp_rset_timeout: "5s",
    });
    expect(t).toEqual({ connectTimeoutSec: 10, heloTimeoutSec: 120, dataDoneTimeoutSec: 3600, rsetTimeoutSec: 5 });
    const cfg = createSessionConfig({ heloName: "h", remoteHost: "r", timeouts: t });
    expect(cfg.timeouts).toEqual({ ...DEFAULT_TIMEOUTS, ...t });
  });

  it("names every one of the session's timeouts", () => {
    expect(new Set(Object.values(TIMEOUT_PARAMS))).toEqual(new Set(Object.keys(DEFAULT_TIMEOUTS)));
  });

  it.each([
    [{ smtp_conect_timeout: 5 }, /unknown SMTP timeout parameter smtp_conect_timeout/],
    [{ smtp_helo_timeout: 0 }, /smtp_helo_timeout must be a positive time/],
    [{ smtp_helo_timeout: "-5s" }, /positive time/],
    [{ smtp_helo_timeout: "5d" }, /positive time/],
    [{ smtp_helo_timeout: true }, /positive time/],
    [[], /must be a JSON object/],
    [null, /must be a JSON object/],
  ])("refuses %j", (input, msg) => {
    expect(() => parseSmtpTimeouts(input)).toThrow(msg);
  });
});
