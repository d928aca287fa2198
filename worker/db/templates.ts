/**
 * Stored templates in D1 (migrations/0020), a tenant's own.
 *
 * DESCRIPTION
 *   TemplateRow                  a row; `draft` and `published` are TemplateContent JSON.
 *   findTemplate(db, t, ident)   by id or alias; null when the tenant has none.
 *   listTemplates(db, t, q)      a page, newest first, after or before a template id; null when
 *                                the cursor names none of the tenant's templates.
 *   insertTemplate(db, row)      a new template; "alias_taken" when the tenant's alias exists.
 *   updateDraft(db, t, id, f)    a new draft (and name or alias); "alias_taken" likewise.
 *   publishTemplate(db, t, id, nowMs)  the draft becomes the published version.
 *   deleteTemplate(db, t, id)    whether it was there.
 */

export interface TemplateRow {
  tenant_id: string;
  id: string;
  name: string;
  alias: string | null;
  draft: string;
  draft_version: string;
  published: string | null;
  published_version: string | null;
  created_at: number;
  updated_at: number;
  published_at: number | null;
}

/** The one unique constraint besides the key (ids are fresh UUIDs): the tenant's alias. */
const taken = (e: unknown) => /UNIQUE constraint failed/i.test(String(e instanceof Error ? e.message : e));

/** A template of the tenant by id or alias. */
export async function findTemplate(db: D1Database, tenant: string, ident: string): Promise<TemplateRow | null> {
  return db
    .prepare(
      "SELECT * FROM templates WHERE tenant_id = ?1 AND id = ?2 UNION ALL SELECT * FROM templates WHERE tenant_id = ?1 AND alias = ?2 LIMIT 1",
    )
    .bind(tenant, ident)
    .first<TemplateRow>();
}

/** A page of the tenant's templates, newest first (see the header). */
export async function listTemplates(
  db: D1Database,
  tenant: string,
  q: { limit: number; after?: string; before?: string },
): Promise<{ rows: TemplateRow[]; hasMore: boolean } | null> {
  const cursor = q.after ?? q.before;
  let at: { created_at: number; id: string } | null = null;
  if (cursor !== undefined) {
    at = await db
      .prepare("SELECT created_at, id FROM templates WHERE tenant_id = ? AND id = ?")
      .bind(tenant, cursor)
      .first<{ created_at: number; id: string }>();
    if (!at) return null;
  }
  const rows =
    at === null
      ? (
          await db
            .prepare("SELECT * FROM templates WHERE tenant_id = ? ORDER BY created_at DESC, id DESC LIMIT ?")
            .bind(tenant, q.limit + 1)
            .all<TemplateRow>()
        ).results
      : q.after !== undefined
        ? (
            await db
              .prepare(
                "SELECT * FROM templates WHERE tenant_id = ? AND (created_at, id) < (?, ?) ORDER BY created_at DESC, id DESC LIMIT ?",
              )
              .bind(tenant, at.created_at, at.id, q.limit + 1)
              .all<TemplateRow>()
          ).results
        : (
            await db
              .prepare(
                `SELECT * FROM (SELECT * FROM templates WHERE tenant_id = ? AND (created_at, id) > (?, ?) ORDER BY created_at, id LIMIT ?)
          ORDER BY created_at DESC, id DESC`,
              )
              .bind(tenant, at.created_at, at.id, q.limit + 1)
              .all<TemplateRow>()
          ).results;
  const hasMore = rows.length > q.limit;
  if (!hasMore) return { rows, hasMore };
  return { rows: q.before !== undefined && at !== null ? rows.slice(1) : rows.slice(0, q.limit), hasMore };
}

/** Inserts a new template. */
export async function insertTemplate(db: D1Database, r: TemplateRow): Promise<"ok" | "alias_taken"> {
  try {
    await db
      .prepare(
        `INSERT INTO templates (tenant_id, id, name, alias, draft, draft_version, published, published_version, created_at, updated_at,
        published_at)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .bind(
        r.tenant_id,
        r.id,
        r.name,
        r.alias,
        r.draft,
        r.draft_version,
        r.published,
        r.published_version,
        r.created_at,
        r.updated_at,
        r.published_at,
      )
      .run();
    return "ok";
  } catch (e) {
    if (taken(e)) return "alias_taken";
    throw e;
  }
}

/** Replaces the draft (and the name and alias). */
export async function updateDraft(
  db: D1Database,
  tenant: string,
  id: string,
  f: { name: string; alias: string | null; draft: string; draftVersion: string; nowMs: number },
): Promise<"ok" | "alias_taken"> {
  try {
    await db
      .prepare(
        "UPDATE templates SET name = ?, alias = ?, draft = ?, draft_version = ?, updated_at = ? WHERE tenant_id = ? AND id = ?",
      )
      .bind(f.name, f.alias, f.draft, f.draftVersion, f.nowMs, tenant, id)
      .run();
    return "ok";
  } catch (e) {
    if (taken(e)) return "alias_taken";
    throw e;
  }
}

/** The draft becomes the published version. */
export async function publishTemplate(db: D1Database, tenant: string, id: string, nowMs: number): Promise<void> {
  await db
    .prepare(
      "UPDATE templates SET published = draft, published_version = draft_version, published_at = ?, updated_at = ? WHERE tenant_id = ? AND id = ?",
    )
    .bind(nowMs, nowMs, tenant, id)
    .run();
}

/** Deletes a template; whether it was there. */
export async function deleteTemplate(db: D1Database, tenant: string, id: string): Promise<boolean> {
  return (
    ((await db.prepare("DELETE FROM templates WHERE tenant_id = ? AND id = ?").bind(tenant, id).run()).meta.changes ??
      0) > 0
  );
}
