-- 004: how long each bot's /stats list was when the harvester last read it (records, valid or
-- not). With a paged /stats ([service].stats_page_size) an incremental run reads on from there
-- (a page back, to stand on a record it has) instead of from the first page, so a run costs
-- what is new, not the bot's whole history. NULL until the bot's list is next read.
ALTER TABLE bot_latest_stat ADD COLUMN stats_listed BIGINT;
