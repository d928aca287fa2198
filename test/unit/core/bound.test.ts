import { describe, expect, it } from "vitest";
import { admitMessage } from "../../../durable-objects/core";
import { makeQmgr, rcpts } from "./harness";

describe("the §7.5 in-core bound", () => {
  it("with defaults the README's figure is 221000 per transport", () => {
    const { q } = makeQmgr({});
    const g = q.cfg.global;
    expect(Math.max(g.messageRecipientMinimum * g.messageActiveLimit + 20000 + 1000, g.messageRecipientLimit)).toBe(
      221000,
    );
  });

  it("the README's max() form can be exceeded by a first read that overshoots its slots (Postfix code, documented)", () => {
    // R = 2 (raised to the active limit), M = 1 × 2, pools 0: README bound max(2 + 0, 2) = 2.
    const { q, src } = makeQmgr({
      qmgr_message_active_limit: 2,
      qmgr_message_recipient_limit: 1,
      qmgr_message_recipient_minimum: 1,
      default_recipient_limit: 0,
      default_extra_recipient_limit: 0,
    });
    src.files.set("m0", rcpts(2));
    src.files.set("m1", rcpts(1, "dest.example", "smtp", 2));
    admitMessage(q, { id: "m0", createTime: 0, rcptTotal: 2 }, 0); // first read: max(2 − 0, 1) = 2, no slots held
    admitMessage(q, { id: "m1", createTime: 0, rcptTotal: 1 }, 0); // first read: max(2 − 2, 1) = its minimum
    expect(q.rcptCount).toBe(3); // = R + minimum: within the proven bound M + S + R = 4
  });
});
