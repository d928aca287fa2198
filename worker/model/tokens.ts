/** What a signed VERP address stands for (worker/mail/verp.ts): a bounce return path or an unsubscribe address. */
export type TokenKind = "bounces" | "unsubscribe";
