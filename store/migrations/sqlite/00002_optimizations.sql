-- Estimation service (issue 6): stored optimisations per endpoint pair,
-- jobs that ask to run with the optimised concurrency, and jobs that fix
-- their streams. Keep it
-- column-for-column identical to ../postgres/00002_optimizations.sql.

-- +goose Up
ALTER TABLE jobs ADD COLUMN optimize INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN streams INTEGER NOT NULL DEFAULT 0;

CREATE TABLE optimizations (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    src          TEXT    NOT NULL,
    dst          TEXT    NOT NULL,
    streams      INTEGER NOT NULL,
    throughput   REAL    NOT NULL,
    sample_bytes INTEGER NOT NULL DEFAULT 0,
    samples      TEXT    NOT NULL DEFAULT '[]',
    model        TEXT    NOT NULL DEFAULT '',
    cost         REAL    NOT NULL DEFAULT 0,
    cost_bytes   INTEGER NOT NULL DEFAULT 0,
    at           INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX optimizations_pair ON optimizations (src, dst, id);

-- +goose Down
DROP TABLE optimizations;
ALTER TABLE jobs DROP COLUMN streams;
ALTER TABLE jobs DROP COLUMN optimize;
