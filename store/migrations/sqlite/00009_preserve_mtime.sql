-- Whether a job gives each file its source's modification time (Globus's
-- preserve_timestamp). Jobs stored before this column do not. Keep it
-- column-for-column identical to ../postgres/00009_preserve_mtime.sql.

-- +goose Up
ALTER TABLE jobs ADD COLUMN preserve_mtime INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE jobs DROP COLUMN preserve_mtime;
