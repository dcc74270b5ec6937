-- trend_bot_names: each bot's name as the service's listing shows it now (null when it gives
-- none), the day botstats first saw it and the day it was removed (null while listed). What
-- the report names bots by. Names are the service's: untrusted text.
-- Created by `botstats trends` in the archive; ${export_dir} is the absolute export directory.
CREATE OR REPLACE VIEW trend_bot_names AS
SELECT * FROM read_parquet('${export_dir}/bot_names/**/*.parquet', hive_partitioning = false);
