-- What a job's submitter attached to the job and to its files (FTS3's
-- job_metadata and files[].metadata, which Rucio finds its requests by),
-- given back with them as it was sent. idx is the file's index, -1 the
-- job's own. Apart from tasks, so that the scheduler's loop never loads
-- it. Keep it column-for-column identical to ../sqlite/00012_metadata.sql.

-- +goose Up
CREATE TABLE file_metadata (
    job_id   BIGINT  NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    idx      INTEGER NOT NULL,
    metadata TEXT    NOT NULL,
    PRIMARY KEY (job_id, idx)
);

-- +goose Down
DROP TABLE file_metadata;
