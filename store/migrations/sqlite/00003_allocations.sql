-- Policy Service (issue 7): stream allocations on endpoint pairs, leases
-- that a restarted server keeps. Keep it column-for-column identical to
-- the other dialect's 00003_allocations.sql. The policy configuration
-- (parameters per pair, VO weights, the policy) is a setting.

-- +goose Up
CREATE TABLE allocations (
    id       TEXT    PRIMARY KEY,
    src      TEXT    NOT NULL,
    dst      TEXT    NOT NULL,
    client   TEXT    NOT NULL,
    vo       TEXT    NOT NULL DEFAULT '',
    streams  INTEGER NOT NULL DEFAULT 0,
    want     INTEGER NOT NULL DEFAULT 0,
    draining INTEGER NOT NULL DEFAULT 0,
    reason   TEXT    NOT NULL DEFAULT '',
    created  INTEGER NOT NULL DEFAULT 0,
    expires  INTEGER NOT NULL DEFAULT 0
) STRICT;

-- +goose Down
DROP TABLE allocations;
