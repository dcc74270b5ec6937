-- trend_custom_daily: per bot, day and custom field name; kind = numeric | text.
-- numeric: records, value_last, value_min, value_max, value_mean.
-- text: records, value_text (last of the day), changed_at (when that value began), changes.
-- Created by `botstats trends` in the archive; ${export_dir} is the absolute export directory.
CREATE OR REPLACE VIEW trend_custom_daily AS
SELECT * FROM read_parquet('${export_dir}/custom_daily/**/*.parquet', hive_partitioning = false);
