-- Each store's identity: a host's store that was replaced (reinstalled,
-- another CORRAL_HOME) is a new history, told apart from the one mirrored;
-- and a host renamed in config.toml is the same store under a new name.
CREATE TABLE store_identity (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    store TEXT NOT NULL
);
INSERT INTO store_identity (id, store) VALUES (1, lower(hex(randomblob(16))));

-- The identity of the store each host's runs were read from, and what
-- kind of trouble keeps it from being followed (`unreachable`,
-- `other_version`, `host_key`, `refused`, `no_corral`), with `error`.
ALTER TABLE hosts ADD COLUMN store TEXT;
ALTER TABLE hosts ADD COLUMN trouble TEXT;
