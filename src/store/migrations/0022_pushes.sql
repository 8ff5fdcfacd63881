-- Pushes to the user's phone (`[push]`): each thing that needs the user is
-- pushed once, under its key (`budget:RUN:BUDGET`), whoever sends it (the
-- tray, `corral push listen`): claimed by setting `sent_at`, given back if
-- the server did not take it. An answer acts once: `answered_at`.
CREATE TABLE pushes (
    key         TEXT PRIMARY KEY,
    body        TEXT NOT NULL,     -- the message, as JSON
    created_at  TEXT NOT NULL,
    sent_at     TEXT,
    tries       INTEGER NOT NULL DEFAULT 0,
    trouble     TEXT,              -- why the last send failed
    answered_at TEXT
);
CREATE INDEX pushes_unsent ON pushes(created_at) WHERE sent_at IS NULL;
