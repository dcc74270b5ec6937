-- trend_directory_daily: per day: bots_reporting, guilds, users (summed over the bots
-- reporting), bots_first_seen, bots_first_reporting, bots_removed.
-- Created by `botstats trends` in the archive; ${export_dir} is the absolute export directory.
CREATE OR REPLACE VIEW trend_directory_daily AS
SELECT * FROM read_parquet('${export_dir}/directory_daily/**/*.parquet', hive_partitioning = false);
