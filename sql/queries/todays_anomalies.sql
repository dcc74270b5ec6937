-- Today's events: those dated on the latest day the archive has stats for (harvests lag the
-- clock, so "today" is the newest day in trend_bot_daily), the most severe first, by name.
-- Another day:  botstats sql -f sql/queries/todays_anomalies.sql --param day=2025-02-01
SELECT b.name, a.bot_id, a.kind, a.summary, a.also, round(a.severity, 2) AS severity,
       a.first_day, a.last_day, a.metric, a.value, a.baseline_median, round(a.score, 1) AS score,
       a.evidence
FROM trend_anomalies AS a
LEFT JOIN bots AS b USING (bot_id)
WHERE a.day = coalesce(CAST(getvariable('day') AS DATE), (SELECT max(day) FROM trend_bot_daily))
ORDER BY a.severity DESC, a.bot_id;
