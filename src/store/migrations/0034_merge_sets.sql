-- A merge of runs being made (`corral merge A B C`, or one run): kept until
-- the whole set is recorded with its runs or taken back, so that a merge
-- whose process was killed mid-way (a closed terminal, SIGKILL during a
-- slow hook) is finished by the next heal, never left merged and unrecorded.
CREATE TABLE merge_sets (
    id INTEGER PRIMARY KEY,
    repo TEXT NOT NULL,
    -- The branch the runs go into, and its commit before the first merge.
    branch TEXT NOT NULL,
    before TEXT NOT NULL,
    squashed INTEGER NOT NULL,
    -- The runs, in merge order: a JSON array of ids.
    runs TEXT NOT NULL,
    -- The commit each squashed merge is about to put on the branch,
    -- written before the branch moves: a JSON object, run id to commit. A
    -- commit is the set's only if it is one of these (or a merge of a
    -- run's branch): never by what its message says.
    made TEXT NOT NULL DEFAULT '{}',
    -- The process making it (or healing it), and its start time: a pid
    -- used again by another process is not it.
    pid INTEGER NOT NULL,
    pid_start INTEGER,
    started_at TEXT NOT NULL
);
