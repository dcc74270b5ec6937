-- trend_bot_forecast: per bot, metric ('guilds', 'users') and horizon_days (7, 30, 90).
-- as_of (the bot's last day with a value), day = as_of + horizon_days; forecast (the median
-- path) and its 80% interval lo80..hi80; daily_growth_pct (the trend, percent per day); the
-- model behind it: history_days, last_value, level, slope, sigma, sigma_level, sigma_slope
-- (log1p space; see pipeline/analytics/build/_forecast.py). Bots with under 7 days of values have no rows.
-- Created by `botstats trends` in the archive; ${export_dir} is the absolute export directory.
CREATE OR REPLACE VIEW trend_bot_forecast AS
SELECT * FROM read_parquet('${export_dir}/bot_forecast/**/*.parquet', hive_partitioning = false);
