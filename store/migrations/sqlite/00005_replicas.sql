-- Multi-source downloads (issue 8): a task's other replicas as a JSON
-- list of URLs ('' for none), and the job's split policy ('' for the
-- default). Identical in both dialects.

-- +goose Up
ALTER TABLE tasks ADD COLUMN replicas TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN selection TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE jobs DROP COLUMN selection;
ALTER TABLE tasks DROP COLUMN replicas;
