-- Several servers on one database (issue 10). Identical in both dialects
-- (SQLite runs one server, which holds every lease).
--
-- leases: one row per scheduling partition (a source endpoint). The owner
-- schedules the partition's tasks until expires (unix ns, the database's
-- clock); term grows by one at every change of hands and fences writes:
-- a task row carries the term it was claimed under (tasks.claim), and the
-- scheduler's writes succeed only while that term is the partition's.
--
-- servers: live servers, for sharing the partitions among them.
-- endpoint_load: each server's load on each endpoint, so that the owner
-- of one partition sees what the others run at a shared destination.

-- +goose Up
CREATE TABLE leases (
    name    TEXT   PRIMARY KEY,
    owner   TEXT   NOT NULL DEFAULT '',
    term    BIGINT NOT NULL DEFAULT 0,
    expires BIGINT NOT NULL DEFAULT 0
);

CREATE TABLE servers (
    id   TEXT   PRIMARY KEY,
    url  TEXT   NOT NULL DEFAULT '',
    seen BIGINT NOT NULL DEFAULT 0
);

CREATE TABLE endpoint_load (
    server     TEXT             NOT NULL,
    endpoint   TEXT             NOT NULL,
    cc         INTEGER          NOT NULL DEFAULT 0,
    throughput DOUBLE PRECISION NOT NULL DEFAULT 0,
    at         BIGINT           NOT NULL DEFAULT 0,
    PRIMARY KEY (server, endpoint)
);

ALTER TABLE tasks ADD COLUMN claim BIGINT NOT NULL DEFAULT 0;
ALTER TABLE audit ADD COLUMN term BIGINT NOT NULL DEFAULT 0;
-- Claiming: the active tasks of a partition not yet claimed under its
-- current term (ClaimTasks).
CREATE INDEX tasks_claim ON tasks (src_endpoint, claim, id) WHERE state NOT IN ('done', 'failed', 'canceled');
-- Cancellations made through any server (CanceledJobs).
CREATE INDEX jobs_canceled ON jobs (finished) WHERE state = 'canceled';

-- +goose Down
DROP INDEX jobs_canceled;
DROP INDEX tasks_claim;
ALTER TABLE audit DROP COLUMN term;
ALTER TABLE tasks DROP COLUMN claim;
DROP TABLE endpoint_load;
DROP TABLE servers;
DROP TABLE leases;
