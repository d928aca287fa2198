// @ts-check
/**
 * cohort's commands on messages and their events: send a test message, tail the event feed,
 * show a message, hold, release, requeue and cancel (one message, or by domain, tag or tenant).
 * bin/cohort.mjs hands these commands to messageCommand().
 *
 * EXIT STATUS
 *   As cohort.mjs: 0 success, 1 an API error (thrown by `call`), 2 bad usage (UsageError).
 */
import { UsageError } from "./client.mjs";
import { eventLine, showText } from "./format.mjs";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * Runs one of these commands; null when `command` is not one of them. tail writes to `out`.
 * @param {string} command @param {string[]} args @param {Record<string, any>} values
 * @param {(method: string, path: string, body?: unknown) => Promise<any>} call @param {(json: unknown, text: string) => void} print
 * @param {{ write(s: string): unknown }} out
 */
export async function messageCommand(command, args, values, call, print, out) {
  switch (command) {
    case "send": {
      if (
        !values.from ||
        !values.to?.length ||
        values.subject === undefined ||
        (values.text === undefined && values.html === undefined)
      ) {
        throw new UsageError("usage: cohort send --from A --to B --subject S (--text T | --html H) [--tag name:value]");
      }
      const tags = (values.tag ?? []).map((t) => {
        const [name, value] = t.split(":");
        if (!name || !value) throw new UsageError(`bad --tag ${JSON.stringify(t)}: expected name:value`);
        return { name, value };
      });
      const body = {
        from: values.from,
        to: values.to,
        subject: values.subject,
        ...(values.text !== undefined ? { text: values.text } : {}),
        ...(values.html !== undefined ? { html: values.html } : {}),
        ...(tags.length ? { tags } : {}),
      };
      const r = await call("POST", "/emails", body);
      print(r, r.id);
      return 0;
    }
    case "tail": {
      let after = values.after;
      const max = values.count === undefined ? Infinity : Number(values.count);
      const interval = Math.max(0.1, Number(values.interval)) * 1000;
      let seen = 0;
      for (;;) {
        const qs = new URLSearchParams({
          limit: values.limit ?? "100",
          ...(after ? { after } : {}),
          ...(values.type ? { type: values.type } : {}),
        });
        const page = await call("GET", `/relay/events?${qs}`);
        for (const e of page.data) {
          out.write(`${values.json ? JSON.stringify(e) : eventLine(e)}\n`);
          after = e.id;
          if (++seen >= max) return 0;
        }
        if (values.once && !page.has_more) return 0;
        if (!page.has_more) await sleep(interval);
      }
    }
    case "show": {
      const [id] = args;
      if (!id) throw new UsageError("usage: cohort show <email id>");
      const m = await call("GET", `/relay/messages/${encodeURIComponent(id)}`);
      print(m, showText(m));
      return 0;
    }
    case "hold":
    case "release":
    case "requeue": {
      const [id] = args;
      if (!id) throw new UsageError(`usage: cohort ${command} <email id>`);
      const r = await call("POST", `/relay/messages/${encodeURIComponent(id)}/${command}`);
      print(r, `${command}: ${r.id} (${r.recipients} recipient(s))`);
      return 0;
    }
    case "cancel": {
      const [id] = args;
      if (id) {
        const r = await call(
          "POST",
          `/relay/messages/${encodeURIComponent(id)}/cancel`,
          values.domain ? { domain: values.domain } : {},
        );
        print(r, `cancelled ${r.recipients} recipient(s) of ${r.id}`);
        return 0;
      }
      const tag = values.tag?.[0];
      const [tagName, tagValue] = tag ? tag.split(":") : [];
      if (tag && (!tagName || !tagValue)) throw new UsageError(`bad --tag ${JSON.stringify(tag)}: expected name:value`);
      if (!values.domain && !tag && !values.tenant)
        throw new UsageError(
          "usage: cohort cancel <email id> | cohort cancel [--domain D] [--tag name:value] [--tenant T]",
        );
      const body = {
        ...(values.domain ? { domain: values.domain } : {}),
        ...(tag ? { tag: { name: tagName, value: tagValue } } : {}),
        ...(values.tenant ? { tenant: values.tenant } : {}),
      };
      const r = await call("POST", "/relay/messages/cancel", body);
      print(
        r,
        `cancelled ${r.recipients} recipient(s) in ${r.messages} message(s)${r.has_more ? " (more match: run it again)" : ""}`,
      );
      return 0;
    }
    default:
      return null;
  }
}
