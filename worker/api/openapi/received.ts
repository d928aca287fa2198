/**
 * The OpenAPI rows (document.ts ROUTES) of received mail, of attachments (received and sent) with
 * their download links, and of GET /files/{token}, the signed link itself (no API key; its
 * errors are JSON though the file is not).
 */
import { z } from "zod";
import type { Operation } from "./types";
import { list, Page } from "./shapes";

const InboundAttachment = z.object({
  id: z.string(),
  filename: z.string().nullable(),
  size: z.number().int(),
  content_type: z.string(),
  content_id: z.string().nullable(),
  content_disposition: z.string().nullable(),
});
const Received = z.object({
  id: z.string(),
  to: z.array(z.string()),
  from: z.string(),
  created_at: z.string(),
  subject: z.string(),
  bcc: z.array(z.string()).nullable(),
  cc: z.array(z.string()).nullable(),
  reply_to: z.array(z.string()).nullable(),
  received_for: z.array(z.string()),
  message_id: z.string(),
  attachments: z.array(InboundAttachment),
});
const Link = z.object({ download_url: z.string(), expires_at: z.string() });
const ReceivedEmail = Received.extend({
  object: z.literal("email"),
  html: z.string().nullable(),
  text: z.string().nullable(),
  headers: z.record(z.string(), z.string()),
  raw: Link.nullable(),
});
const AttachmentData = Link.extend({
  id: z.string(),
  filename: z.string().optional(),
  size: z.number().int(),
  content_type: z.string(),
  content_disposition: z.enum(["inline", "attachment"]),
  content_id: z.string().optional(),
});
const ReceivingQuery = z.object({ html_format: z.enum(["data_uri", "cid"]).optional() });

/** Received emails and attachments. */
export const RECEIVED_ROUTES: Operation[] = [
  {
    method: "get",
    path: "/emails/receiving",
    operationId: "listReceivedEmails",
    auth: true,
    summary: "Received emails, newest first",
    query: Page,
    ok: { status: 200, schema: list(Received) },
    errors: [401, 422],
  },
  {
    method: "get",
    path: "/emails/receiving/{id}",
    operationId: "getReceivedEmail",
    auth: true,
    summary: "A received email: html, text, headers, attachments and a link to its raw bytes",
    query: ReceivingQuery,
    ok: { status: 200, schema: ReceivedEmail },
    errors: [401, 404, 422],
  },
  {
    method: "get",
    path: "/emails/receiving/{id}/attachments",
    operationId: "listReceivedAttachments",
    auth: true,
    summary: "A received email's attachments with download links",
    query: Page,
    ok: { status: 200, schema: list(AttachmentData) },
    errors: [401, 404, 422],
  },
  {
    method: "get",
    path: "/emails/receiving/{id}/attachments/{aid}",
    operationId: "getReceivedAttachment",
    auth: true,
    summary: "One attachment of a received email",
    ok: { status: 200, schema: AttachmentData.extend({ object: z.literal("attachment") }) },
    errors: [401, 404],
  },
  {
    method: "get",
    path: "/emails/{id}/attachments",
    operationId: "listEmailAttachments",
    auth: true,
    summary: "A sent email's attachments with download links",
    query: Page,
    ok: { status: 200, schema: list(AttachmentData) },
    errors: [401, 404, 422],
  },
  {
    method: "get",
    path: "/emails/{id}/attachments/{aid}",
    operationId: "getEmailAttachment",
    auth: true,
    summary: "One attachment of a sent email",
    ok: { status: 200, schema: AttachmentData.extend({ object: z.literal("attachment") }) },
    errors: [401, 404],
  },
];

/** A download link's file. */
export const DOWNLOAD_ROUTES: Operation[] = [
  {
    method: "get",
    path: "/files/{token}",
    operationId: "downloadFile",
    auth: false,
    summary: "A download link's file (signed, no API key): an attachment or a received email's raw bytes",
    ok: { status: 200, schema: z.string(), media: "application/octet-stream", jsonErrors: true },
    errors: [404],
  },
];
