-- One bot's history, day by day: size, growth, rank, load and commands.
-- The bot id is a DuckDB variable:
--   botstats sql -f sql/queries/bot_history.sql --param bot_id=123
--   duckdb -cmd "$(botstats sql --attach)" -c "SET VARIABLE bot_id = '123'" -c ".read sql/queries/bot_history.sql"
SELECT d.day, d.guilds, g.guilds_change_1d, g.guilds_change_7d,
       round(g.guilds_pct_7d, 2) AS guilds_pct_7d, r.guilds_rank, r.guilds_rank_change_7d,
       d.users, g.users_change_7d, r.users_rank, d.cpu_load_p95, d.memory_load_p95,
       d.commands_executed, d.records
FROM trend_bot_daily AS d
JOIN trend_bot_growth AS g USING (bot_id, day)
JOIN trend_bot_ranks AS r USING (bot_id, day)
WHERE d.bot_id = coalesce(getvariable('bot_id'),
                          error('set the bot first: --param bot_id=ID (or SET VARIABLE bot_id = ''ID'')'))
ORDER BY d.day;
