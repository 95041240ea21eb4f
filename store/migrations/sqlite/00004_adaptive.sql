-- Adaptive jobs (issue 7): the adaptive client's parameters as JSON, ''
-- for jobs that are not adaptive. Identical in both dialects.

-- +goose Up
ALTER TABLE jobs ADD COLUMN adaptive TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE jobs DROP COLUMN adaptive;
