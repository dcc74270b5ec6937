-- Alerts not yet delivered: for each alert and destination, the latest try when it failed and no
-- try delivered it (the next run tries again, until [alerts].give_up_after). What `botstats
-- status` lists and `botstats alerts list --undelivered` shows.
SELECT destination, arg_max(kind, tried_at) AS kind, alert_key, arg_max(title, tried_at) AS title,
       count(*) AS tries_by_runs, min(tried_at) AS first_tried_at, max(tried_at) AS last_tried_at,
       arg_max(answer, tried_at) AS last_answer
FROM alerts
GROUP BY alert_key, destination
HAVING NOT bool_or(outcome = 'delivered') AND arg_max(outcome, tried_at) = 'failed'
ORDER BY last_tried_at DESC, destination, alert_key;
