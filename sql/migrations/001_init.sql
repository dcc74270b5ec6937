-- 001: the archive. These tables and columns are the public SQL interface of botstats:
-- analysts and other tools query them by these names. Change them only by a new migration.
-- The archive is a DuckLake, which has no primary keys: the keys named in comments are kept
-- unique by the harvester (each batch is one transaction that checks them).
-- Timestamps are TIMESTAMPTZ in UTC. `raw` keeps the record exactly as the service sent it
-- (unknown fields included), so nothing the service says is lost.

CREATE TABLE harvest_runs (
    run_id        VARCHAR NOT NULL,         -- key; e.g. 20261122T161500Z-3f9a1c
    started_at    TIMESTAMPTZ NOT NULL,
    finished_at   TIMESTAMPTZ,
    status        VARCHAR NOT NULL,         -- running | complete | partial | failed | interrupted
    mode          VARCHAR NOT NULL,         -- incremental | full
    base_url      VARCHAR,
    bots_seen     BIGINT DEFAULT 0,
    bots_new      BIGINT DEFAULT 0,
    bots_removed  BIGINT DEFAULT 0,
    bots_fetched  BIGINT DEFAULT 0,         -- bots whose full /stats list was downloaded
    stats_added   BIGINT DEFAULT 0,
    stats_updated BIGINT DEFAULT 0,
    requests      BIGINT DEFAULT 0,
    retries       BIGINT DEFAULT 0,
    rejects       BIGINT DEFAULT 0,
    errors        BIGINT DEFAULT 0,
    pid           INTEGER,
    host          VARCHAR,
    message       VARCHAR
);

CREATE TABLE bots (
    bot_id        VARCHAR NOT NULL,         -- key
    name          VARCHAR,
    raw           JSON,                     -- the bot record as last seen
    first_seen_at TIMESTAMPTZ NOT NULL,
    last_seen_at  TIMESTAMPTZ NOT NULL,
    removed_at    TIMESTAMPTZ,              -- set when a complete listing no longer has the bot
    run_id        VARCHAR NOT NULL          -- the run that last wrote this row
);

CREATE TABLE bot_stats (
    stat_id           VARCHAR NOT NULL,     -- the service's id, or sha1(bot_id, timestamp)
    bot_id            VARCHAR NOT NULL,
    recorded_at       TIMESTAMPTZ NOT NULL,
    users             BIGINT,
    guilds            BIGINT,
    shards            BIGINT,
    memory_load       DOUBLE,               -- percent 0..100
    cpu_load          DOUBLE,               -- percent 0..100
    commands_executed BIGINT,               -- as sent: may be cumulative and may reset
    raw               JSON NOT NULL,
    run_id            VARCHAR NOT NULL,     -- the run that archived (or last changed) the record
    archived_at       TIMESTAMPTZ NOT NULL
    -- key: (bot_id, stat_id)
);

CREATE TABLE bot_stat_custom (
    stat_id     VARCHAR NOT NULL,
    bot_id      VARCHAR NOT NULL,
    recorded_at TIMESTAMPTZ NOT NULL,
    name        VARCHAR NOT NULL,
    value_text  VARCHAR,                    -- every value as text (JSON for lists/objects)
    value_num   DOUBLE,                     -- numeric values (and booleans as 0/1); else NULL
    run_id      VARCHAR NOT NULL
    -- One row per (bot_id, stat_id, name). Written with their stat record (new or changed) in
    -- the same transaction, so the stat's key makes them exactly-once.
);

-- Snapshots of the configured user, taken once per run: history is kept, never overwritten.
CREATE TABLE users (
    run_id     VARCHAR NOT NULL,
    user_id    VARCHAR NOT NULL,
    is_me      BOOLEAN NOT NULL,
    raw        JSON NOT NULL,
    fetched_at TIMESTAMPTZ NOT NULL
    -- key: (run_id, user_id)
);

CREATE TABLE user_bots (
    run_id     VARCHAR NOT NULL,
    user_id    VARCHAR NOT NULL,
    bot_id     VARCHAR NOT NULL,
    raw        JSON NOT NULL,
    fetched_at TIMESTAMPTZ NOT NULL
    -- key: (run_id, user_id, bot_id)
);

CREATE TABLE user_servers (
    run_id     VARCHAR NOT NULL,
    user_id    VARCHAR NOT NULL,
    server_id  VARCHAR NOT NULL,
    raw        JSON NOT NULL,
    fetched_at TIMESTAMPTZ NOT NULL
    -- key: (run_id, user_id, server_id)
);

CREATE TABLE user_webhooks (
    run_id     VARCHAR NOT NULL,
    user_id    VARCHAR NOT NULL,
    webhook_id VARCHAR NOT NULL,
    raw        JSON NOT NULL,
    fetched_at TIMESTAMPTZ NOT NULL
    -- key: (run_id, user_id, webhook_id)
);

-- Records and pages that failed validation: kept with the reason, never dropped silently.
CREATE TABLE rejects (
    reject_key VARCHAR NOT NULL,            -- key: sha1 of endpoint, bot, reason and raw: kept once
    run_id   VARCHAR NOT NULL,              -- the first run that saw it
    endpoint VARCHAR NOT NULL,              -- e.g. GET /bots/123/stats
    bot_id   VARCHAR,
    reason   VARCHAR NOT NULL,
    raw      VARCHAR,                       -- the record or page body as received (truncated at 1 MB)
    seen_at  TIMESTAMPTZ NOT NULL
);

-- Bots that still failed after retries; the next run tries them again.
CREATE TABLE harvest_errors (
    run_id   VARCHAR NOT NULL,
    endpoint VARCHAR NOT NULL,
    bot_id   VARCHAR,
    error    VARCHAR NOT NULL,
    seen_at  TIMESTAMPTZ NOT NULL
);

