-- trend_movers: per day, window_days (7, 30), metric (guilds, users), measure (abs, pct),
-- direction (gainer, loser): the top bots ranked 1.. by change, with start_value, end_value,
-- change, pct_change. Only bots with at least [trends].movers_min_guilds guilds at the start.
-- Created by `botstats trends` in the archive; ${export_dir} is the absolute export directory.
CREATE OR REPLACE VIEW trend_movers AS
SELECT * FROM read_parquet('${export_dir}/movers/**/*.parquet', hive_partitioning = false);
