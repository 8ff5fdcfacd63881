-- Sending a push, once and not in a loop: a claim is `claimed_at` (a
-- sender that dies mid-send leaves it, and it is claimed again a minute
-- later) and `sent_at` only once the server took it; one the server did
-- not take waits `next_try_at` (longer each try); one the phone took and
-- the webhook did not goes again to the webhook alone (`webhook_only`).
ALTER TABLE pushes ADD COLUMN claimed_at TEXT;
ALTER TABLE pushes ADD COLUMN next_try_at TEXT;
ALTER TABLE pushes ADD COLUMN webhook_only INTEGER NOT NULL DEFAULT 0;
