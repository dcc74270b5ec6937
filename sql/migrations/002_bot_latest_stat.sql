-- 002: the newest archived record of each bot. The harvester keeps it in the same transaction
-- as the records it writes, so an incremental run looks up what it already has in one row per
-- bot instead of scanning all of bot_stats once per listing page (0.1-0.2 s a page on a
-- 10-million-row archive, growing with it). Analysts may read it too: join bot_stats on
-- (bot_id, stat_id) for the whole record.
CREATE TABLE bot_latest_stat (
    bot_id      VARCHAR NOT NULL,    -- key
    stat_id     VARCHAR NOT NULL,       -- the newest record's key in bot_stats
    recorded_at TIMESTAMPTZ NOT NULL    -- its time: the newest of the bot's archived records
);

INSERT INTO bot_latest_stat
SELECT bot_id, arg_max(stat_id, recorded_at), max(recorded_at)
FROM bot_stats
GROUP BY bot_id;
