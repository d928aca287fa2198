/**
 * Small builders of the response shapes Resend's rows share: a page of items, a reference
 * ({object, id}), a deletion, and the page query (limit, after, before).
 */
import { z } from "zod";
import { PageQuerySchema } from "../http/template-schemas";

/** The page query (limit, after, before) as an object the document can list parameters of. */
export const Page = PageQuerySchema as unknown as z.ZodObject;
/** `{object: "list", has_more, data}`. */
export const list = <T extends z.ZodType>(item: T) =>
  z.object({ object: z.literal("list"), has_more: z.boolean(), data: z.array(item) });
/** `{object, id}`. */
export const ref = <T extends string>(object: T) => z.object({ object: z.literal(object), id: z.string() });
/** `{object, id, deleted}`. */
export const deleted = <T extends string>(object: T) => ref(object).extend({ deleted: z.boolean() });
