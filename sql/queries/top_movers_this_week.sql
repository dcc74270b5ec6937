-- Top movers this week: the 7-day gainers and losers of the latest day in trend_movers,
-- by absolute and percent change of guilds and users (bots below [trends].movers_min_guilds
-- guilds a week ago do not take part).
--   botstats sql -f sql/queries/top_movers_this_week.sql
SELECT day, metric, measure, direction, rank, bot_id, start_value, end_value, change,
       round(pct_change, 2) AS pct_change
FROM trend_movers
WHERE window_days = 7
  AND day = (SELECT max(day) FROM trend_movers WHERE window_days = 7)
ORDER BY metric, measure, direction, rank;
