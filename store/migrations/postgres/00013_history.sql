-- The dashboard's history: each server's samples of the load it
-- schedules (its partitions), taken every few seconds and kept for a day
-- or so (older rows are pruned as new ones are written). One row per
-- link (src, dst endpoint) and job owner that had something queued,
-- running, done, failed or moved since the server's previous sample;
-- owner_id 0 is the server's mark that it sampled at that time, so that
-- a time without other rows reads as idle, not as unknown; its seconds
-- are the time since the server's previous sample (what its bytes are
-- counted over). bytes, done and failed count since the previous sample;
-- queued and running are the counts at the sample. Keep it
-- column-for-column identical to ../sqlite/00013_history.sql.
--
-- tasks_failed serves the dashboard's list of recent failed files, newest
-- first, without a scan of every task ever run.

-- +goose Up
CREATE TABLE history (
    server   TEXT    NOT NULL,
    at       BIGINT  NOT NULL,
    src      TEXT    NOT NULL DEFAULT '',
    dst      TEXT    NOT NULL DEFAULT '',
    owner_id BIGINT  NOT NULL DEFAULT 0,
    vo       TEXT    NOT NULL DEFAULT '',
    bytes    BIGINT  NOT NULL DEFAULT 0,
    queued   INTEGER NOT NULL DEFAULT 0,
    running  INTEGER NOT NULL DEFAULT 0,
    done     INTEGER NOT NULL DEFAULT 0,
    failed   INTEGER NOT NULL DEFAULT 0,
    seconds  DOUBLE PRECISION NOT NULL DEFAULT 0
);
CREATE INDEX history_at ON history (at);
CREATE INDEX tasks_failed ON tasks (finished) WHERE state = 'failed';

-- +goose Down
DROP INDEX tasks_failed;
DROP TABLE history;
