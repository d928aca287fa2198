-- Complaints (issue 5): a feedback-loop report names the original message by its Message-ID
-- header, which the sender may have set itself (custom headers, raw messages). The index keeps
-- it so POST /relay/complaints can find such a message. Forward-only; older rows get it the next
-- time they are indexed.
ALTER TABLE messages ADD COLUMN message_id TEXT;
CREATE INDEX IF NOT EXISTS messages_by_message_id ON messages (message_id);
