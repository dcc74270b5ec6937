-- 003: drop the ART index on bot_stats(recorded_at) that 001 created. DuckDB's planner never
-- used it (a time range, even one instant, is a sequential scan with zonemaps), while every
-- insert paid to keep it: on a 10-million-row archive a 122,880-row batch took a quarter to a
-- third longer with it. Indexes are not part of the public SQL interface.
DROP INDEX IF EXISTS bot_stats_recorded;
