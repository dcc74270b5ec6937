-- trend_anomalies: bot-days whose daily delta of metric (guilds, users, commands_executed)
-- has |score| > [trends].anomaly_threshold; score is the robust z against the deltas of the
-- [trends].anomaly_window days before: baseline_median, baseline_mad, baseline_days.
-- Created by `botstats trends` in the archive; ${export_dir} is the absolute export directory.
CREATE OR REPLACE VIEW trend_anomalies AS
SELECT * FROM read_parquet('${export_dir}/anomalies/**/*.parquet', hive_partitioning = false);
