-- Today's anomalies: bot-days flagged on the latest day the archive has stats for (harvests
-- lag the clock, so "today" is the newest day in trend_bot_daily), strongest first.
-- Another day:  botstats sql -f sql/queries/todays_anomalies.sql --param day=2025-02-01
SELECT a.day, a.bot_id, b.name, a.metric, a.value, a.baseline_median, a.baseline_mad,
       a.baseline_days, round(a.score, 2) AS score
FROM trend_anomalies AS a
LEFT JOIN bots AS b USING (bot_id)
WHERE a.day = coalesce(CAST(getvariable('day') AS DATE), (SELECT max(day) FROM trend_bot_daily))
ORDER BY abs(a.score) DESC, a.bot_id, a.metric;
