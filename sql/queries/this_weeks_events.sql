-- This week's events: those dated in the 7 days to the latest day with stats, the most severe
-- first, by name (what the report's anomaly section leads with).
-- Another week:  botstats sql -f sql/queries/this_weeks_events.sql --param day=2025-02-01
SELECT b.name, a.bot_id, a.day, a.kind, a.summary, a.also, round(a.severity, 2) AS severity,
       a.evidence
FROM trend_anomalies AS a
LEFT JOIN bots AS b USING (bot_id)
WHERE a.day BETWEEN coalesce(CAST(getvariable('day') AS DATE),
                             (SELECT max(day) FROM trend_bot_daily)) - INTERVAL 6 DAY
                AND coalesce(CAST(getvariable('day') AS DATE), (SELECT max(day) FROM trend_bot_daily))
ORDER BY a.severity DESC, a.day DESC, a.bot_id;
