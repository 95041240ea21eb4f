-- What an estimate's answer rests on: the fitted curve's own value at the
-- chosen streams (throughput may be lower: clamped to what the samples
-- support), the fit's relative uncertainty, whether it was clamped and
-- why. Rows stored before carry 0, 0, false and ''. Keep it
-- column-for-column identical to ../sqlite/00008_optimization_bound.sql.

-- +goose Up
ALTER TABLE optimizations ADD COLUMN fitted DOUBLE PRECISION NOT NULL DEFAULT 0;
ALTER TABLE optimizations ADD COLUMN uncertainty DOUBLE PRECISION NOT NULL DEFAULT 0;
ALTER TABLE optimizations ADD COLUMN clamped BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE optimizations ADD COLUMN note TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE optimizations DROP COLUMN note;
ALTER TABLE optimizations DROP COLUMN clamped;
ALTER TABLE optimizations DROP COLUMN uncertainty;
ALTER TABLE optimizations DROP COLUMN fitted;
