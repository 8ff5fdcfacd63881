-- Tool calls the agent was refused (Claude Code's `permission_denials`), as
-- a JSON array of `Tool(detail)` strings; NULL when none.
ALTER TABLE runs ADD COLUMN denied TEXT;
