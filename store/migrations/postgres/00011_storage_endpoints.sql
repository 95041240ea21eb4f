-- Storage endpoints: GridFTP and XRootD servers an admin registers (url
-- gsiftp://, ftp://, root://), which the service reaches itself rather
-- than through an agent of their own. via names the agent that moves
-- their bytes when the other end of a copy is not an agent and the two
-- servers cannot copy between themselves. Their credentials are apart,
-- so that no listing of endpoints carries a secret. Keep it
-- column-for-column identical to ../sqlite/00011_storage_endpoints.sql.

-- +goose Up
ALTER TABLE endpoints ADD COLUMN via TEXT NOT NULL DEFAULT '';
CREATE TABLE endpoint_credentials (
    endpoint   TEXT    PRIMARY KEY,
    credential BYTEA   NOT NULL,
    updated    BIGINT  NOT NULL
);

-- +goose Down
DROP TABLE endpoint_credentials;
ALTER TABLE endpoints DROP COLUMN via;
