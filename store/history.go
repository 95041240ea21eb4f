package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Sample is one row of a server's history: what one link (Src to Dst)
// carried for one job owner since the server's previous sample (Bytes,
// Done, Failed) and what it held at the sample (Queued, Running). A row
// with OwnerID 0 is the server's mark that it sampled at At, Seconds
// after its previous sample: a time with marks and no other rows was
// idle, a time without marks is unknown (no server was sampling).
type Sample struct {
	Server   string
	At       time.Time
	Src, Dst string
	OwnerID  int64
	VO       string
	Bytes    int64
	Queued   int
	Running  int
	Done     int
	Failed   int
	Seconds  float64
}

// SampleQuery selects history: samples taken in [From, To), summed into
// buckets of Step from From, of one owner's transfers (OwnerID) or one
// VO's, or everyone's. The servers' marks are always included.
type SampleQuery struct {
	From, To time.Time
	Step     time.Duration
	OwnerID  int64  // 0: every owner
	VO       string // "": every VO
}

// SampleSum is the sum of one server's samples of one link in one bucket
// (Bucket counts Steps from the query's From). Src and Dst are "" for the
// server's marks, whose Samples is how many times it sampled in the
// bucket (what its gauges, Queued and Running, are averaged over) and
// Seconds the time those samples cover (what its Bytes are a rate over).
type SampleSum struct {
	Server                        string
	Bucket                        int
	Src, Dst                      string
	Bytes                         int64
	Queued, Running, Done, Failed int64
	Samples                       int
	Seconds                       float64
}

// AddSamples writes a server's samples and deletes every server's
// samples taken before pruneBefore (zero: none), in one transaction.
func (s *sqlStore) AddSamples(ctx context.Context, samples []Sample, pruneBefore time.Time) error {
	numbered := s.dialect == dialectPostgres
	err := s.inTx(ctx, func(tx *stx) error {
		if !pruneBefore.IsZero() {
			if _, err := tx.ExecContext(ctx, `DELETE FROM history WHERE at < $1`, toNanos(pruneBefore)); err != nil {
				return err
			}
		}
		const cols = 12
		const batch = 256
		for start := 0; start < len(samples); start += batch {
			chunk := samples[start:min(start+batch, len(samples))]
			args := make([]any, 0, len(chunk)*cols)
			for _, h := range chunk {
				args = append(args, h.Server, toNanos(h.At), h.Src, h.Dst, h.OwnerID, h.VO, h.Bytes, h.Queued, h.Running, h.Done, h.Failed, h.Seconds)
			}
			var b strings.Builder
			b.WriteString(`INSERT INTO history (server, at, src, dst, owner_id, vo, bytes, queued, running, done, failed, seconds) VALUES `)
			writeValues(&b, len(chunk), cols, numbered, nil)
			if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: add %d history samples: %w", len(samples), err)
	}
	return nil
}

// Samples returns the history q selects, summed per server, bucket and
// link, by server, bucket and link.
func (s *sqlStore) Samples(ctx context.Context, q SampleQuery) ([]SampleSum, error) {
	if q.Step <= 0 {
		return nil, fmt.Errorf("store: history: a step of %v", q.Step)
	}
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	from := arg(toNanos(q.From))
	where := `at >= ` + from + ` AND at < ` + arg(toNanos(q.To))
	if q.OwnerID != 0 {
		where += ` AND (owner_id = ` + arg(q.OwnerID) + ` OR owner_id = 0)`
	}
	if q.VO != "" {
		where += ` AND (vo = ` + arg(q.VO) + ` OR owner_id = 0)`
	}
	// Grouped by position (both dialects take it): the bucket is an
	// expression. The marks (owner_id 0) have src = dst = ''.
	rows, err := s.r.QueryContext(ctx, `SELECT server, (at - `+from+`) / `+arg(int64(q.Step))+`, src, dst,
		SUM(bytes), SUM(queued), SUM(running), SUM(done), SUM(failed), COUNT(*), SUM(seconds)
		FROM history WHERE `+where+` GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4`, args...)
	if err != nil {
		return nil, fmt.Errorf("store: history: %w", err)
	}
	defer rows.Close()
	var out []SampleSum
	for rows.Next() {
		var h SampleSum
		var bucket int64
		if err := rows.Scan(&h.Server, &bucket, &h.Src, &h.Dst, &h.Bytes, &h.Queued, &h.Running, &h.Done, &h.Failed, &h.Samples, &h.Seconds); err != nil {
			return nil, fmt.Errorf("store: history: %w", err)
		}
		h.Bucket = int(bucket)
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: history: %w", err)
	}
	return out, nil
}

// Failure is a failed file with its job's owner, VO and label.
type Failure struct {
	Task
	OwnerID int64
	Owner   string
	VO      string
	Label   string
}

// FailureFilter selects failed files: of one owner or one VO (or all),
// whose URLs, error or job label contain Search (case-insensitive; ""
// any), that failed before Before (zero: any time; paging, with
// BeforeID the last row's task id), newest first, at most Limit
// (0: 100).
type FailureFilter struct {
	OwnerID  int64
	VO       string
	Search   string
	Before   time.Time
	BeforeID int64
	Limit    int
}

// FailedTasks lists failed files, newest first (by their finish time,
// through the tasks_failed index).
func (s *sqlStore) FailedTasks(ctx context.Context, f FailureFilter) ([]Failure, error) {
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	// The tasks_failed index's predicate, verbatim.
	where := []string{`t.state = 'failed'`}
	if f.OwnerID != 0 {
		where = append(where, `j.owner_id = `+arg(f.OwnerID))
	}
	if f.VO != "" {
		where = append(where, `j.vo = `+arg(f.VO))
	}
	if f.Search != "" {
		p := arg(likePattern(f.Search))
		where = append(where, `(LOWER(t.src) LIKE `+p+` ESCAPE '\' OR LOWER(t.dst) LIKE `+p+` ESCAPE '\' OR LOWER(t.error) LIKE `+p+` ESCAPE '\' OR LOWER(j.label) LIKE `+p+` ESCAPE '\')`)
	}
	if !f.Before.IsZero() {
		b := arg(toNanos(f.Before))
		where = append(where, `(t.finished < `+b+` OR (t.finished = `+b+` AND t.id < `+arg(f.BeforeID)+`))`)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.r.QueryContext(ctx, `SELECT t.id, t.job_id, t.idx, t.src, t.dst, t.src_endpoint, t.dst_endpoint, t.size, t.done,
		t.attempts, t.arrival, t.started, t.finished, t.error, j.owner_id, u.name, j.vo, j.label
		FROM tasks t JOIN jobs j ON j.id = t.job_id JOIN users u ON u.id = j.owner_id
		WHERE `+strings.Join(where, " AND ")+` ORDER BY t.finished DESC, t.id DESC LIMIT `+arg(limit), args...)
	if err != nil {
		return nil, fmt.Errorf("store: failed files: %w", err)
	}
	defer rows.Close()
	var out []Failure
	for rows.Next() {
		var x Failure
		var arrival, started, finished int64
		if err := rows.Scan(&x.ID, &x.JobID, &x.Index, &x.Src, &x.Dst, &x.SrcEndpoint, &x.DstEndpoint, &x.Size, &x.Done,
			&x.Attempts, &arrival, &started, &finished, &x.Error, &x.OwnerID, &x.Owner, &x.VO, &x.Label); err != nil {
			return nil, fmt.Errorf("store: failed files: %w", err)
		}
		x.State = StateFailed
		x.Arrival, x.Started, x.Finished = fromNanos(arrival), fromNanos(started), fromNanos(finished)
		out = append(out, x)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: failed files: %w", err)
	}
	return out, nil
}

// likePattern is a LIKE pattern (with ESCAPE '\') that matches the
// strings containing s, compared in lower case (LOWER on the column):
// SQLite's LIKE ignores ASCII case and PostgreSQL's does not, and
// LOWER on both sides makes them agree.
func likePattern(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return "%" + r.Replace(strings.ToLower(s)) + "%"
}
