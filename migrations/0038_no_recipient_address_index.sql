-- A recipients row has no entry in an address index (issue 41). The admin search, the one reader
-- of recipients by address, walks messages by tenant and time and asks each message's recipients
-- through the primary key (message_id, idx): a message has at most 50. A one-recipient message's
-- address, in its own row since migration 0035, never had an index entry. The entry cost a row
-- written per recipient of every message of two or more recipients, and its bytes for the
-- retention. Forward-only.
DROP INDEX IF EXISTS recipients_by_address_any_tenant;
