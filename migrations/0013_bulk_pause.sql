-- The complaint-rate brake (worker/api/complaint-brake.ts): while bulk_paused_until is in the
-- future, the tenant's bulk mail (emails with one-click unsubscribe) is refused with 429
-- complaint_rate_exceeded; its transactional mail goes on. Read in the query that authenticates
-- a send request, beside the unsubscribe default.
ALTER TABLE tenant_settings ADD COLUMN bulk_paused_until INTEGER;
ALTER TABLE tenant_settings ADD COLUMN bulk_paused_reason TEXT;
