-- 003: nothing. In the single-DuckDB-file layout of botstats 0.1 this dropped an index on
-- bot_stats(recorded_at) that 001 created there; a DuckLake has no indexes (its files carry
-- min/max statistics, which serve time ranges). Kept so versions keep their numbers.
SELECT 1;
