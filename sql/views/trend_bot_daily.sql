-- trend_bot_daily: one row per bot and UTC day with at least one stat record.
-- bot_id, day, users, guilds, shards (last non-null value of the day),
-- cpu_load_mean, cpu_load_p95, memory_load_mean, memory_load_p95 (percent; p95 interpolated),
-- commands_executed (run during the day; counter resets handled), commands_resets, records,
-- commands_counter (the counter's last value up to the end of the day).
-- Created by `botstats trends` in the archive; ${export_dir} is the absolute export directory.
CREATE OR REPLACE VIEW trend_bot_daily AS
SELECT * FROM read_parquet('${export_dir}/bot_daily/**/*.parquet', hive_partitioning = false);
