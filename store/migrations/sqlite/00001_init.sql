-- Sluice schema, SQLite dialect. Keep it column-for-column identical to
-- ../postgres/00001_init.sql: the store shares its query text between
-- the two dialects.
--
-- Conventions:
--   * times are INTEGER unix nanoseconds (UTC); 0 is the zero time.Time;
--   * booleans are INTEGER 0/1 (what the driver binds a Go bool as);
--   * tables are STRICT, so a value of the wrong type is an error
--     instead of being stored silently;
--   * ids are AUTOINCREMENT so that an id is never reused, even after the
--     newest row is deleted (clients keep job ids).

-- +goose Up
CREATE TABLE settings (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) STRICT;

CREATE TABLE users (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    name    TEXT    NOT NULL UNIQUE,
    vo      TEXT    NOT NULL DEFAULT '',
    admin   INTEGER NOT NULL DEFAULT 0,
    created INTEGER NOT NULL DEFAULT 0
) STRICT;

CREATE TABLE tokens (
    hash    TEXT    PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    label   TEXT    NOT NULL DEFAULT '',
    expires INTEGER NOT NULL DEFAULT 0,
    created INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX tokens_user ON tokens (user_id);

CREATE TABLE jobs (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    owner_id        INTEGER NOT NULL REFERENCES users (id),
    vo              TEXT    NOT NULL DEFAULT '',
    submission_id   TEXT    NOT NULL DEFAULT '',
    label           TEXT    NOT NULL DEFAULT '',
    class           TEXT    NOT NULL DEFAULT '',
    priority        INTEGER NOT NULL DEFAULT 0,
    deadline        INTEGER NOT NULL DEFAULT 0,
    verify_checksum INTEGER NOT NULL DEFAULT 0,
    checksum        TEXT    NOT NULL DEFAULT '',
    retry           INTEGER NOT NULL DEFAULT 0,
    state           TEXT    NOT NULL,
    created         INTEGER NOT NULL DEFAULT 0,
    finished        INTEGER NOT NULL DEFAULT 0
) STRICT;
-- Idempotent submission: one job per (owner, submission id), when set.
CREATE UNIQUE INDEX jobs_submission ON jobs (owner_id, submission_id) WHERE submission_id <> '';
CREATE INDEX jobs_owner ON jobs (owner_id, id);
CREATE INDEX jobs_state ON jobs (state, id);

CREATE TABLE tasks (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id       INTEGER NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    idx          INTEGER NOT NULL,
    src          TEXT    NOT NULL,
    dst          TEXT    NOT NULL,
    src_endpoint TEXT    NOT NULL DEFAULT '',
    dst_endpoint TEXT    NOT NULL DEFAULT '',
    size         INTEGER NOT NULL DEFAULT -1,
    expected     TEXT    NOT NULL DEFAULT '',
    batch        INTEGER NOT NULL DEFAULT 0,
    state        TEXT    NOT NULL,
    cc           INTEGER NOT NULL DEFAULT 0,
    done         INTEGER NOT NULL DEFAULT 0,
    attempts     INTEGER NOT NULL DEFAULT 0,
    preemptions  INTEGER NOT NULL DEFAULT 0,
    arrival      INTEGER NOT NULL DEFAULT 0,
    started      INTEGER NOT NULL DEFAULT 0,
    finished     INTEGER NOT NULL DEFAULT 0,
    wait         REAL    NOT NULL DEFAULT 0,
    trans        REAL    NOT NULL DEFAULT 0,
    checksum     TEXT    NOT NULL DEFAULT '',
    throughput   REAL    NOT NULL DEFAULT 0,
    error        TEXT    NOT NULL DEFAULT ''
) STRICT;
-- Tasks by job and position (also serves the foreign key and the counters).
CREATE UNIQUE INDEX tasks_job_idx ON tasks (job_id, idx);
-- The non-terminal tasks (ActiveTasks at start-up): a partial index stays
-- as small as the active set however long the history grows. Queries must
-- repeat this WHERE clause verbatim for the planner to use it.
CREATE INDEX tasks_active ON tasks (id) WHERE state NOT IN ('done', 'failed', 'canceled');

CREATE TABLE endpoints (
    name           TEXT    PRIMARY KEY,
    url            TEXT    NOT NULL DEFAULT '',
    max_throughput REAL    NOT NULL DEFAULT 0,
    max_cc         INTEGER NOT NULL DEFAULT 0,
    registered     INTEGER NOT NULL DEFAULT 0,
    last_seen      INTEGER NOT NULL DEFAULT 0,
    up             INTEGER NOT NULL DEFAULT 0
) STRICT;

CREATE TABLE checkpoints (
    key     TEXT    PRIMARY KEY,
    data    BLOB    NOT NULL,
    updated INTEGER NOT NULL DEFAULT 0
) STRICT;

CREATE TABLE observations (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    src        TEXT    NOT NULL,
    dst        TEXT    NOT NULL,
    cc         INTEGER NOT NULL DEFAULT 0,
    src_load   INTEGER NOT NULL DEFAULT 0,
    dst_load   INTEGER NOT NULL DEFAULT 0,
    size       INTEGER NOT NULL DEFAULT 0,
    throughput REAL    NOT NULL DEFAULT 0,
    at         INTEGER NOT NULL DEFAULT 0
) STRICT;

-- The audit log is append-only and outlives what it describes, so job_id
-- and task_id are plain numbers, not foreign keys (0: none).
CREATE TABLE audit (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    at         INTEGER NOT NULL DEFAULT 0,
    job_id     INTEGER NOT NULL DEFAULT 0,
    task_id    INTEGER NOT NULL DEFAULT 0,
    actor      TEXT    NOT NULL DEFAULT '',
    from_state TEXT    NOT NULL DEFAULT '',
    to_state   TEXT    NOT NULL DEFAULT '',
    detail     TEXT    NOT NULL DEFAULT ''
) STRICT;
CREATE INDEX audit_job ON audit (job_id, id);

-- +goose Down
DROP TABLE audit;
DROP TABLE observations;
DROP TABLE checkpoints;
DROP TABLE endpoints;
DROP TABLE tasks;
DROP TABLE jobs;
DROP TABLE tokens;
DROP TABLE users;
DROP TABLE settings;
