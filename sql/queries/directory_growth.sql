-- Directory growth: per day, the bots reporting, total guilds and users with their change
-- against exactly 7 days before (NULL when that day has no data), and the bots the listing
-- gained and lost, with the running net count.
--   botstats sql -f sql/queries/directory_growth.sql
SELECT t.day, t.bots_reporting, t.guilds,
       t.guilds - w.guilds AS guilds_change_7d,
       round(100.0 * (t.guilds - w.guilds) / nullif(w.guilds, 0), 2) AS guilds_pct_7d,
       t.users, t.users - w.users AS users_change_7d,
       t.bots_first_seen, t.bots_removed,
       CAST(sum(t.bots_first_seen - t.bots_removed) OVER (ORDER BY t.day) AS BIGINT)
           AS bots_listed_net
FROM trend_directory_daily AS t
LEFT JOIN trend_directory_daily AS w ON w.day = t.day - 7
ORDER BY t.day;
