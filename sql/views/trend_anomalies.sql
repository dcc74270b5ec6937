-- trend_anomalies: one row per event of a bot's daily series: kind (spike, drop, level_shift,
-- outage, counter_reset), the lead metric, first_day..last_day (null: a level shift stays),
-- its size (ratio, summary: "users x3.4 for 1 day", "guilds -18% since 2026-11-02"), the
-- other metrics that moved with it (also) and a severity that orders them (log10 of the
-- user-days moved). How events are found, and what is not one: docs/trends.md.
-- Created by `botstats trends` in the archive; ${export_dir} is the absolute export directory.
CREATE OR REPLACE VIEW trend_anomalies AS
SELECT * FROM read_parquet('${export_dir}/anomalies/**/*.parquet', hive_partitioning = false);
