-- 009: a listing writes only what changed. `bots` was rewritten for every bot every hour, to
-- move `last_seen_at`: each bot's whole record (its `raw` JSON) again, plus the deletion of the
-- old row. Its columns now live in two tables and `bots` is a view over them, with the same
-- columns in the same order:
--   bot_listing    what the listing says of a bot (name, raw), when it was first seen and removed:
--                  rewritten only when one of these changes (run_id: the run that changed it);
--   bot_last_seen  when each bot was last listed and by which run: one narrow row per bot, the
--                  only row a listing rewrites for a bot whose record did not change.
-- The data files are written with zstd from here on: a third smaller than snappy for the records'
-- JSON (docs/design.md, "Writes proportional to what is new").
CALL archive.set_option('parquet_compression', 'zstd');

CREATE TABLE bot_listing (
    bot_id        VARCHAR NOT NULL,         -- key
    name          VARCHAR,
    raw           JSON,
    first_seen_at TIMESTAMPTZ NOT NULL,
    removed_at    TIMESTAMPTZ,
    run_id        VARCHAR NOT NULL          -- the run that last changed this row
);

CREATE TABLE bot_last_seen (
    bot_id       VARCHAR NOT NULL,          -- key
    last_seen_at TIMESTAMPTZ NOT NULL,
    run_id       VARCHAR NOT NULL           -- the run that last listed the bot
);

INSERT INTO bot_listing SELECT bot_id, name, raw, first_seen_at, removed_at, run_id FROM bots;
INSERT INTO bot_last_seen SELECT bot_id, last_seen_at, run_id FROM bots;
DROP TABLE bots;

CREATE VIEW bots AS
SELECT l.bot_id, l.name, l.raw, l.first_seen_at, s.last_seen_at, l.removed_at, s.run_id
FROM bot_listing AS l JOIN bot_last_seen AS s USING (bot_id);
