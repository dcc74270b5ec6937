-- 006: records and their custom fields are written in one file per month of recorded_at. Files
-- then carry narrow recorded_at ranges whatever wrote them (a first harvest, `harvest --full`, a
-- conversion), so the incremental trends' read of the last weeks skips every older file by the
-- catalog's statistics, and costs the weeks it reads, not the archive. Files written before this
-- migration keep their layout (an archive of botstats 0.2.0: its first harvest's files are read
-- by every incremental trends run, a cost that stops growing once it is migrated).
ALTER TABLE bot_stats SET PARTITIONED BY (year(recorded_at), month(recorded_at));
ALTER TABLE bot_stat_custom SET PARTITIONED BY (year(recorded_at), month(recorded_at));
