-- Every healer asks several times a second for ended runs not yet reaped;
-- they are rare, so a partial index answers without reading the others.
CREATE INDEX runs_unreaped ON runs(num) WHERE exited_at IS NULL;
