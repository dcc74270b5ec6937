-- trend_bot_ranks: one row per bot and day.
-- guilds_rank, users_rank (1 = largest among bots reporting that day, ties share the best rank);
-- {guilds,users}_rank_change_{1,7}d = rank on exactly day-N minus rank today (climbing > 0).
-- Created by `botstats trends` in the archive; ${export_dir} is the absolute export directory.
CREATE OR REPLACE VIEW trend_bot_ranks AS
SELECT * FROM read_parquet('${export_dir}/bot_ranks/**/*.parquet', hive_partitioning = false);
