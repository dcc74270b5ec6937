-- 008: the alerts ledger (docs/alerts.md). One row each time a run tried to tell one destination
-- one alert: what it was about (alert_key, the same for every try and reminder of one thing),
-- when, and what the destination answered. The next runs read it so that an hourly cron job
-- tells each thing once, reminds of a condition that goes on at most every
-- [alerts].repeat_interval, says "resolved" to those it told, and tries again what was not
-- delivered. It holds no secret: destinations are named, never their URL.
CREATE TABLE alerts (
    alert_key   VARCHAR NOT NULL,     -- e.g. failed:20261122T160000Z-3f9a1c, event:123:2026-11-20
    kind        VARCHAR NOT NULL,     -- failed | partial | lock | stale | resolved | event | milestone
    incident    VARCHAR,              -- failed/partial/lock/stale: the condition; resolved: the one it closes
    shard       VARCHAR NOT NULL,     -- K/N of the runs it is about; '' for the whole directory
    destination VARCHAR NOT NULL,     -- the name of [alerts.destinations.NAME]
    run_id      VARCHAR,              -- the run that tried (NULL: a run that never got the lock)
    tried_at    TIMESTAMPTZ NOT NULL,
    outcome     VARCHAR NOT NULL,     -- delivered | failed | given_up
    tries       INTEGER NOT NULL,     -- requests (or SMTP conversations) it took
    answer      VARCHAR NOT NULL,     -- what the destination answered, e.g. 'HTTP 429, then HTTP 204'
    since       TIMESTAMPTZ,          -- failed/partial/lock/stale: when the condition began
    title       VARCHAR NOT NULL,     -- the alert in one line
    alert       JSON NOT NULL         -- the alert as told (title, lines, bot, day, ...)
);
