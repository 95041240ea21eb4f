-- What a job does with a file already at a destination: '' (Sluice's
-- default: one identical to the source is recorded done without being
-- copied, any other fails), 'fail' (FTS3's overwrite false: any fails)
-- or 'replace'. Jobs stored before this column keep nothing replaced.
-- Identical in both dialects.

-- +goose Up
ALTER TABLE jobs ADD COLUMN overwrite TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE jobs DROP COLUMN overwrite;
