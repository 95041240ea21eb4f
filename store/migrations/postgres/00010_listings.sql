-- Directories that jobs copy whole (recursive items): the service lists
-- each source a page at a time and adds a task per file, with the
-- cursor (the path of the last entry listed) in the same transaction, so
-- a listing resumes after a restart without adding a file twice. Keep it
-- column-for-column identical to ../sqlite/00010_listings.sql.

-- +goose Up
CREATE TABLE listings (
    job_id       BIGINT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    item         BIGINT NOT NULL,
    src          TEXT NOT NULL,
    dst          TEXT NOT NULL,
    src_endpoint TEXT NOT NULL,
    dst_endpoint TEXT NOT NULL,
    last_path    TEXT NOT NULL DEFAULT '',
    files        BIGINT NOT NULL DEFAULT 0,
    dirs         BIGINT NOT NULL DEFAULT 0,
    done         BOOLEAN NOT NULL DEFAULT FALSE,
    error        TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (job_id, item)
);

-- +goose Down
DROP TABLE listings;
