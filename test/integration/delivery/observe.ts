/**
 * What the delivery tests observe: messages the smtp-server sink received (its HTTP listing)
 * and recipients' states through GET /emails/:id, waited for with a deadline.
 */
import { eventually, getEmail } from "../helpers";

/** A message as the sink's listing shows it (body base64). */
export type Caught = { mailFrom: string; rcptTo: string[]; body: string };

/** A recipient as GET /emails/:id shows it. */
export type Rcpt = {
  email: string;
  status: string;
  attempts: number;
  next_attempt_at: string | null;
  last_response: { code?: number; enhanced?: string; text?: string; mx?: string; tls?: boolean } | null;
};

/** Everything the sink (listing on `httpPort`) has received so far. */
export async function caught(httpPort: number): Promise<Caught[]> {
  return (await fetch(`http://127.0.0.1:${httpPort}/messages`)).json<Caught[]>();
}

/** Waits until every recipient of the email satisfies `done`. */
export function recipientsWhen(
  key: string,
  id: string,
  done: (r: Rcpt) => boolean,
  what: string,
  timeoutMs = 10_000,
): Promise<Rcpt[]> {
  return eventually(
    async () => {
      const rs = (await getEmail(key, id)).body.recipients as unknown as Rcpt[];
      return rs.every(done) ? rs : undefined;
    },
    timeoutMs,
    what,
  );
}
