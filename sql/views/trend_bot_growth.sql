-- trend_bot_growth: one row per bot and day of trend_bot_daily.
-- guilds, users; {guilds,users}_change_{1,7,30}d and _pct_{1,7,30}d against exactly day-N
-- (NULL when the bot has no record then); {guilds,users}_mean_7d (days with a record among
-- the 7 ending on day); {guilds,users}_cdgr_30d (compound daily growth over 30 days, percent/day).
-- Created by `botstats trends` in the archive; ${export_dir} is the absolute export directory.
CREATE OR REPLACE VIEW trend_bot_growth AS
SELECT * FROM read_parquet('${export_dir}/bot_growth/**/*.parquet', hive_partitioning = false);
