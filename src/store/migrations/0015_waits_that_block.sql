-- A wait frees its run's slot only while it really blocks the run's agent,
-- never because some process of the run waits (a `corral wait &` in the
-- background, while the agent works on). `waits.blocks`:
--   0  it does not block the agent (or not yet: the waiter looks again);
--   1  it blocks the agent's tool call that runs it: it counts while the
--      agent's stream says a tool call is open (`runs.tool_open`);
--   2  it blocks the agent itself (the agent, or a shell, waits on it).
-- Rows written before this migration were counted as blocking: 2.
ALTER TABLE waits ADD COLUMN blocks INTEGER NOT NULL DEFAULT 2;
-- Set by the run's shepherd while its agent's stream says a tool call is
-- in flight (a tool_use without its result yet).
ALTER TABLE runs ADD COLUMN tool_open INTEGER NOT NULL DEFAULT 0;
