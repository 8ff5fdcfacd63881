-- Agents that launch agents: when a parent collected a child's result (by
-- waiting on it, reading it, or being handed it in a continuation turn),
-- and when a parent last began waiting on its children.

ALTER TABLE runs ADD COLUMN collected_at TEXT;
ALTER TABLE runs ADD COLUMN waiting_at TEXT;
