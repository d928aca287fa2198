/**
 * A catch-all SMTP server (smtp-server from npm) on 127.0.0.1 that keeps what arrives in
 * memory, with a small HTTP listing beside it: the local delivery target of `npm start` and
 * the sink of the delivery integration tests.
 *
 * DESCRIPTION
 *   startCatcher({ smtpPort, httpPort, scripted })  listens on the given ports (0 = any free
 *       one). GET /messages on the HTTP port answers [{ mailFrom, rcptTo, body (base64),
 *       receivedAt }], oldest first; DELETE /messages empties it. With `scripted`, recipients
 *       choose the answer to their RCPT TO by local part: `reject-…` gets 550 5.1.1,
 *       `tempfail-…` gets 451 4.3.0 on its first RCPT and 250 afterwards; `tempfail3-…` gets
 *       451 on its first three RCPTs (a deferral that lasts several retries).
 *   Returns { smtpPort, httpPort, messages, close }. STARTTLS is not offered (plain loopback).
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo, Server as NetServer } from "node:net";
import { SMTPServer } from "smtp-server";

/** One message as it arrived. */
export interface CaughtMessage {
  mailFrom: string;
  rcptTo: string[];
  /** The DATA bytes, base64. */
  body: string;
  receivedAt: number;
}

/** A running catcher. */
export interface Catcher {
  smtpPort: number;
  httpPort: number;
  messages: CaughtMessage[];
  close: () => Promise<void>;
}

/** Catcher options. */
export interface CatcherOptions {
  smtpPort?: number;
  httpPort?: number;
  /** Answer RCPT TO by local part (see header). */
  scripted?: boolean;
}

type RcptError = Error & { responseCode?: number };

function rcptError(code: number, text: string): RcptError {
  const e: RcptError = new Error(text);
  e.responseCode = code;
  return e;
}

function smtpServer(messages: CaughtMessage[], scripted: boolean): SMTPServer {
  const tempfailed = new Map<string, number>();
  return new SMTPServer({
    logger: false,
    disableReverseLookup: true,
    authOptional: true,
    disabledCommands: ["STARTTLS"],
    hideENHANCEDSTATUSCODES: false,
    closeTimeout: 50,
    onRcptTo: (address, _session, callback) => {
      const local = address.address.slice(0, address.address.lastIndexOf("@")).toLowerCase();
      if (scripted && local.startsWith("reject-")) return callback(rcptError(550, "5.1.1 No such user here"));
      const fails = !scripted ? 0 : local.startsWith("tempfail-") ? 1 : local.startsWith("tempfail3-") ? 3 : 0;
      const failed = tempfailed.get(address.address) ?? 0;
      if (failed < fails) {
        tempfailed.set(address.address, failed + 1);
        return callback(rcptError(451, "4.3.0 Try again later"));
      }
      callback();
    },
    onData: (stream, session, callback) => {
      const chunks: Buffer[] = [];
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("end", () => {
        const env = session.envelope;
        messages.push({
          mailFrom: env.mailFrom ? env.mailFrom.address : "",
          rcptTo: env.rcptTo.map((r) => r.address),
          body: Buffer.concat(chunks).toString("base64"),
          receivedAt: Date.now(),
        });
        callback();
      });
    },
  });
}

function listen(server: NetServer, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => resolve((server.address() as AddressInfo).port));
  });
}

function httpListing(messages: CaughtMessage[]): Server {
  return createServer((req, res) => {
    if (req.url !== "/messages") {
      res.writeHead(404).end();
      return;
    }
    if (req.method === "DELETE") messages.splice(0);
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(messages));
  });
}

/** Starts the catcher (see header). */
export async function startCatcher(opts: CatcherOptions = {}): Promise<Catcher> {
  const messages: CaughtMessage[] = [];
  const smtp = smtpServer(messages, opts.scripted ?? false);
  // A client that resets its connection (a worker stopped mid-session) is not the catcher's
  // problem: without a listener smtp-server's "error" event would end the process.
  smtp.on("error", () => undefined);
  const http = httpListing(messages);
  const smtpPort = await listen(smtp.server, opts.smtpPort ?? 0);
  let httpPort: number;
  try {
    httpPort = await listen(http, opts.httpPort ?? 0);
  } catch (e) {
    await new Promise<void>((r) => smtp.close(() => r()));
    throw e;
  }
  const close = async () => {
    http.closeAllConnections();
    await Promise.all([
      new Promise<void>((r) => smtp.close(() => r())),
      new Promise<void>((r) => http.close(() => r())),
    ]);
  };
  return { smtpPort, httpPort, messages, close };
}
