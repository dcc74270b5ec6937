-- 007: runs of a sharded harvest (`botstats harvest --shard K/N`): N workers, each archiving the
-- bots whose id hashes to its K, write into one archive at the same time. Each run records its
-- shard, so `botstats status` shows every shard's last run; a run of an older botstats has none
-- (read as 0 of 1, the whole directory). commit_retries: the run's commits that collided with
-- another worker's and were run again (docs/archive.md).
ALTER TABLE harvest_runs ADD COLUMN shard INTEGER;
ALTER TABLE harvest_runs ADD COLUMN shards INTEGER;
ALTER TABLE harvest_runs ADD COLUMN commit_retries BIGINT DEFAULT 0;
