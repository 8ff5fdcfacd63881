-- Project preset files the user trusted (`corral presets trust DIR`): a
-- project's preset that runs a command, a `setup` or arguments of its own is
-- code from whoever wrote the repository, run only once the user has
-- trusted it, by its content: a changed file is asked about again.
CREATE TABLE trusted_presets (
    path       TEXT PRIMARY KEY,  -- the file, canonical
    sha256     TEXT NOT NULL,     -- its content when trusted, hex
    trusted_at TEXT NOT NULL
) WITHOUT ROWID;
