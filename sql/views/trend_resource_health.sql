-- trend_resource_health: per bot and ISO week (week = its Monday):
-- cpu_load_p95, memory_load_p95 over the week's records; days with a record; cpu_hot_days,
-- memory_hot_days, hot_days: days whose p95 load was above [trends].health_threshold.
-- Created by `botstats trends` in the archive; ${export_dir} is the absolute export directory.
CREATE OR REPLACE VIEW trend_resource_health AS
SELECT * FROM read_parquet('${export_dir}/resource_health/**/*.parquet', hive_partitioning = false);
