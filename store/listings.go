package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// insertListings stores a new job's listings (CreateJob).
func insertListings(ctx context.Context, tx *stx, jobID int64, ls []Listing) error {
	for _, l := range ls {
		if _, err := tx.ExecContext(ctx, `INSERT INTO listings (job_id, item, src, dst, src_endpoint, dst_endpoint)
			VALUES ($1, $2, $3, $4, $5, $6)`, jobID, l.Item, l.Src, l.Dst, l.SrcEndpoint, l.DstEndpoint); err != nil {
			return fmt.Errorf("insert listing %d: %w", l.Item, err)
		}
	}
	return nil
}

const listingCols = `l.job_id, l.item, l.src, l.dst, l.src_endpoint, l.dst_endpoint, l.last_path, l.files, l.dirs, l.done, l.error`

func scanListing(row scanner) (Listing, error) {
	var l Listing
	err := row.Scan(&l.JobID, &l.Item, &l.Src, &l.Dst, &l.SrcEndpoint, &l.DstEndpoint, &l.LastPath, &l.Files, &l.Dirs, &l.Done, &l.Error)
	return l, err
}

// ActiveListings implements Store.
func (s *sqlStore) ActiveListings(ctx context.Context) ([]Listing, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+listingCols+` FROM listings l JOIN jobs j ON j.id = l.job_id
		WHERE NOT l.done AND j.state = 'active' ORDER BY l.job_id, l.item`)
	if err != nil {
		return nil, fmt.Errorf("store: active listings: %w", err)
	}
	defer rows.Close()
	var out []Listing
	for rows.Next() {
		l, err := scanListing(rows)
		if err != nil {
			return nil, fmt.Errorf("store: active listings: %w", err)
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: active listings: %w", err)
	}
	return out, nil
}

// AddListed implements Store.
func (s *sqlStore) AddListed(ctx context.Context, l Listing, next Listing, tasks []Task) error {
	fail := func(err error) error {
		return fmt.Errorf("store: listing %d of job %d: %w", l.Item, l.JobID, err)
	}
	err := s.inTx(ctx, func(tx *stx) error {
		state, err := jobState(ctx, tx, l.JobID)
		if err != nil {
			return err
		}
		done, files, dirs, why, last := next.Done, next.Files, next.Dirs, next.Error, next.LastPath
		if Terminal(state) {
			// Canceled meanwhile: no more files, and the listing ends.
			done, tasks = true, nil
		}
		res, err := tx.ExecContext(ctx, `UPDATE listings SET last_path = $1, files = $2, dirs = $3, done = $4, error = $5
			WHERE job_id = $6 AND item = $7 AND last_path = $8 AND NOT done`,
			last, files, dirs, done, why, l.JobID, l.Item, l.LastPath)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			if err == nil {
				err = fmt.Errorf("%w: the listing moved past %q, or ended", ErrConflict, l.LastPath)
			}
			return err
		}
		if len(tasks) == 0 {
			return nil
		}
		var base int
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(idx), -1) FROM tasks WHERE job_id = $1`, l.JobID).Scan(&base); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		for i := range tasks {
			tasks[i].Index = base + 1 + i
		}
		return s.insertTasks(ctx, tx, Job{ID: l.JobID}, tasks, make([]int64, len(tasks)))
	})
	if err != nil {
		return fail(err)
	}
	return nil
}
