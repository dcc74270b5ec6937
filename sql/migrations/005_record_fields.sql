-- 005: the top-level fields of the records the archive has seen, and since which run. A
-- service that starts sending fields the archive has not seen (a new counter, a renamed field)
-- is then said once, by that run's summary and by `botstats status`; the records' `raw` column
-- keeps the fields themselves. One row per (kind, field), written only for fields not yet in it.
CREATE TABLE record_fields (
    kind          VARCHAR NOT NULL,     -- bot | stat
    field         VARCHAR NOT NULL,     -- a top-level key of those records
    first_run_id  VARCHAR NOT NULL,     -- the run that first saw it
    first_seen_at TIMESTAMPTZ NOT NULL,
    baseline      BOOLEAN NOT NULL      -- seen by the first run that noted fields: not drift
);
