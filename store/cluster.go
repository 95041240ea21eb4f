package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Several servers on one database (docs/SCALING.md).
//
// Scheduling is partitioned by source endpoint: a partition's tasks are
// scheduled by the server that holds its lease. A lease has a term that
// grows by one each time it changes hands (or its owner restarts); a task
// row records the term it was claimed under, and the scheduler's writes
// (UpdateTasksFenced) succeed only while that term is still the
// partition's, so a server that lost a lease cannot overwrite what the new
// owner decided. Lease expiry uses the database's clock, so servers need
// not agree on the time.

// Lease is one partition's scheduling lease.
type Lease struct {
	Partition string
	Owner     string
	Term      int64
	Expires   time.Time // in the database's clock
}

// ServerInfo is a live server.
type ServerInfo struct {
	ID   string
	URL  string
	Seen time.Time
}

// EndpointLoad is one server's load on one endpoint: what SEAL needs to
// know about transfers other servers run there.
type EndpointLoad struct {
	Server     string
	Endpoint   string
	CC         int
	Throughput float64
	At         time.Time
}

// StaleTermError is returned by UpdateTasksFenced when the caller no longer
// holds (the claimed term of) some tasks' partitions: another server has
// taken them over. Nothing was written.
type StaleTermError struct {
	Partitions []string
}

func (e *StaleTermError) Error() string {
	return fmt.Sprintf("stale lease term on partition(s) %s: another server schedules them now", strings.Join(e.Partitions, ", "))
}

// ErrStaleTerm matches a *StaleTermError with errors.Is.
var ErrStaleTerm = errors.New("stale lease term")

func (e *StaleTermError) Is(target error) bool { return target == ErrStaleTerm }

// nowSQL is the database's clock in unix nanoseconds.
func (s *sqlStore) nowSQL() string {
	if s.dialect == dialectPostgres {
		return `(extract(epoch from clock_timestamp()) * 1000000000)::bigint`
	}
	return `CAST((julianday('now') - 2440587.5) * 86400000000000.0 AS INTEGER)`
}

// AcquireLease takes the partition for owner if it is free, expired, or
// already owner's (a restarted server with the same ID), incrementing its
// term. held is false, with the current holder's lease, if another owner
// holds it.
func (s *sqlStore) AcquireLease(ctx context.Context, partition, owner string, ttl time.Duration) (Lease, bool, error) {
	now := s.nowSQL()
	q := `INSERT INTO leases (name, owner, term, expires) VALUES ($1, $2, 1, ` + now + ` + $3)
		ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, term = leases.term + 1, expires = excluded.expires
		WHERE leases.expires < ` + now + ` OR leases.owner = excluded.owner
		RETURNING owner, term, expires`
	l := Lease{Partition: partition}
	var exp int64
	err := s.w.QueryRowContext(ctx, q, partition, owner, int64(ttl)).Scan(&l.Owner, &l.Term, &exp)
	if errors.Is(err, sql.ErrNoRows) {
		err = s.r.QueryRowContext(ctx, `SELECT owner, term, expires FROM leases WHERE name = $1`, partition).Scan(&l.Owner, &l.Term, &exp)
		if err != nil {
			return Lease{}, false, fmt.Errorf("store: lease %q: %w", partition, err)
		}
		l.Expires = fromNanos(exp)
		return l, false, nil
	}
	if err != nil {
		return Lease{}, false, fmt.Errorf("store: acquire lease %q: %w", partition, err)
	}
	l.Expires = fromNanos(exp)
	return l, true, nil
}

// renewBatch is the leases renewed per statement (two parameters each).
const renewBatch = 500

// param is the k-th (1-based) placeholder of a statement.
func param(numbered bool, k int) string {
	if numbered {
		return "$" + strconv.Itoa(k)
	}
	return "?"
}

// RenewLeases extends owner's leases (partition -> term) by ttl and
// returns the ones it still holds: a lease whose term changed has been
// taken over. A lease that expired but that nobody took is renewed.
func (s *sqlStore) RenewLeases(ctx context.Context, owner string, terms map[string]int64, ttl time.Duration) (map[string]int64, error) {
	held := make(map[string]int64, len(terms))
	if len(terms) == 0 {
		return held, nil
	}
	names := make([]string, 0, len(terms))
	for n := range terms {
		names = append(names, n)
	}
	slices.Sort(names)
	// One statement for all of them: a server holding a thousand
	// partitions renewed them one UPDATE at a time in 120-150 ms, a third
	// of the renewal period's budget at a short TTL. The rows are locked
	// in name order, the order UpdateTasksFenced takes them FOR SHARE,
	// so a renewal and a fenced write of the same server cannot deadlock.
	numbered := s.dialect == dialectPostgres
	err := s.inTx(ctx, func(tx *stx) error {
		for lo := 0; lo < len(names); lo += renewBatch {
			chunk := names[lo:min(lo+renewBatch, len(names))]
			var b strings.Builder
			lock := ""
			if numbered {
				lock = " FOR UPDATE OF l"
			}
			b.WriteString(`WITH v AS (SELECT * FROM (VALUES `)
			writeValues(&b, len(chunk), 2, numbered, []string{"TEXT", "BIGINT"})
			b.WriteString(`) AS x), k AS (SELECT l.name FROM leases l JOIN v ON l.name = v.column1 AND l.term = v.column2
				WHERE l.owner = ` + param(numbered, 2*len(chunk)+1) + ` ORDER BY l.name` + lock + `)
			UPDATE leases SET expires = ` + s.nowSQL() + ` + ` + param(numbered, 2*len(chunk)+2) +
				` WHERE name IN (SELECT name FROM k) RETURNING name`)
			args := make([]any, 0, 2*len(chunk)+2)
			for _, n := range chunk {
				args = append(args, n, terms[n])
			}
			args = append(args, owner, int64(ttl))
			rows, err := tx.QueryContext(ctx, b.String(), args...)
			if err != nil {
				return err
			}
			for rows.Next() {
				var n string
				if err := rows.Scan(&n); err != nil {
					rows.Close()
					return err
				}
				held[n] = terms[n]
			}
			if err := rows.Close(); err != nil {
				return err
			}
			if err := rows.Err(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: renew %d leases: %w", len(terms), err)
	}
	return held, nil
}

// ReleaseLease gives a partition up (it expires now) if owner still holds
// it under term.
func (s *sqlStore) ReleaseLease(ctx context.Context, partition, owner string, term int64) error {
	if _, err := s.w.ExecContext(ctx, `UPDATE leases SET expires = 0 WHERE name = $1 AND owner = $2 AND term = $3`,
		partition, owner, term); err != nil {
		return fmt.Errorf("store: release lease %q: %w", partition, err)
	}
	return nil
}

// Leases lists every lease by partition.
func (s *sqlStore) Leases(ctx context.Context) ([]Lease, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT name, owner, term, expires FROM leases ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("store: leases: %w", err)
	}
	defer rows.Close()
	var out []Lease
	for rows.Next() {
		var l Lease
		var exp int64
		if err := rows.Scan(&l.Partition, &l.Owner, &l.Term, &exp); err != nil {
			return nil, fmt.Errorf("store: leases: %w", err)
		}
		l.Expires = fromNanos(exp)
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: leases: %w", err)
	}
	return out, nil
}

// ServerBeat records that server id (reachable at url) is alive and
// returns the servers seen within ttl, by ID (id among them).
func (s *sqlStore) ServerBeat(ctx context.Context, id, url string, ttl time.Duration) ([]ServerInfo, error) {
	now := s.nowSQL()
	if _, err := s.w.ExecContext(ctx, `INSERT INTO servers (id, url, seen) VALUES ($1, $2, `+now+`)
		ON CONFLICT (id) DO UPDATE SET url = excluded.url, seen = excluded.seen`, id, url); err != nil {
		return nil, fmt.Errorf("store: server beat: %w", err)
	}
	rows, err := s.r.QueryContext(ctx, `SELECT id, url, seen FROM servers WHERE seen > `+now+` - $1 ORDER BY id`, int64(ttl))
	if err != nil {
		return nil, fmt.Errorf("store: servers: %w", err)
	}
	defer rows.Close()
	var out []ServerInfo
	for rows.Next() {
		var si ServerInfo
		var seen int64
		if err := rows.Scan(&si.ID, &si.URL, &seen); err != nil {
			return nil, fmt.Errorf("store: servers: %w", err)
		}
		si.Seen = fromNanos(seen)
		out = append(out, si)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: servers: %w", err)
	}
	return out, nil
}

// ClaimTasks claims up to limit active tasks of the partitions owner
// holds (unexpired) that were not claimed under the partition's current
// term: new tasks, and all of a partition's tasks just after it changed
// hands. It sets their claim to the term and returns them, by ID. On
// PostgreSQL the rows are taken FOR UPDATE SKIP LOCKED, so concurrent
// claimers never wait on each other's rows. There is deliberately no ORDER
// BY: a batch is read straight off the tasks_claim index range of each
// partition (claimed rows are outside it), where ordering by ID would sort
// every unclaimed task of the partitions for each batch of a take-over.
func (s *sqlStore) ClaimTasks(ctx context.Context, owner string, limit int) ([]Task, error) {
	if limit <= 0 {
		limit = 1000
	}
	q := `WITH c AS (
		SELECT t.id AS cid, l.term AS cterm FROM tasks t JOIN leases l ON l.name = t.src_endpoint
		WHERE l.owner = $1 AND l.expires > ` + s.nowSQL() + ` AND t.claim < l.term AND t.state NOT IN ` + terminalSQL + `
		LIMIT $2)
	UPDATE tasks SET claim = c.cterm FROM c WHERE tasks.id = c.cid RETURNING ` + taskCols
	if s.dialect == dialectPostgres {
		// A lateral probe of each held partition's index range: with
		// nothing new to claim (every cycle, with a million queued tasks
		// already claimed) it costs one empty index range per partition,
		// where a join lets the planner scan the whole table.
		q = `WITH c AS (
		SELECT x.id AS cid, l.term AS cterm FROM leases l, LATERAL (
			SELECT t.id FROM tasks t
			WHERE t.src_endpoint = l.name AND t.claim < l.term AND t.state NOT IN ` + terminalSQL + `
			LIMIT $2 FOR UPDATE OF t SKIP LOCKED) x
		WHERE l.owner = $1 AND l.expires > ` + s.nowSQL() + `
		LIMIT $2)
	UPDATE tasks SET claim = c.cterm FROM c WHERE tasks.id = c.cid RETURNING ` + taskCols
	}
	var out []Task
	err := s.inTx(ctx, func(tx *stx) error {
		if s.dialect == dialectPostgres {
			// Claiming changes claim, an indexed column, so the claimed
			// rows' old entries stay in the tasks_claim range until
			// vacuum. A bitmap scan (the planner's usual custom plan for
			// the probe) re-reads them and their heap pages on every
			// call; a plain index scan marks them dead the first time.
			// Measured on 1 M tasks: 418 ms per call late in a take-over
			// with bitmaps, 36 ms without (docs/results/scale/store.md).
			if _, err := tx.ExecContext(ctx, `SET LOCAL enable_bitmapscan = off`); err != nil {
				return err
			}
		}
		rows, err := tx.QueryContext(ctx, q, owner, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			t, err := scanTask(rows)
			if err != nil {
				return err
			}
			out = append(out, t)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("store: claim tasks for %s: %w", owner, err)
	}
	slices.SortFunc(out, func(a, b Task) int { return cmpInt64(a.ID, b.ID) })
	return out, nil
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// checkLeases locks owner's leases of the partitions names (sorted) FOR
// SHARE, so that no take-over commits while the caller writes under them,
// and returns a StaleTermError naming the partitions stale reports from
// the terms held.
func (s *sqlStore) checkLeases(ctx context.Context, tx *stx, owner string, names []string, stale func(held map[string]int64) []string) error {
	if len(names) == 0 {
		return nil
	}
	numbered := s.dialect == dialectPostgres
	lock := ""
	if numbered {
		lock = ` FOR SHARE`
	}
	args := []any{owner}
	for _, n := range names {
		args = append(args, n)
	}
	rows, err := tx.QueryContext(ctx, `SELECT name, term FROM leases WHERE owner = $1 AND name IN `+
		inList(2, len(names), numbered)+` ORDER BY name`+lock, args...)
	if err != nil {
		return fmt.Errorf("leases: %w", err)
	}
	held := map[string]int64{}
	for rows.Next() {
		var n string
		var term int64
		if err := rows.Scan(&n, &term); err != nil {
			rows.Close()
			return err
		}
		held[n] = term
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if bad := stale(held); len(bad) > 0 {
		slices.Sort(bad)
		return &StaleTermError{Partitions: slices.Compact(bad)}
	}
	return nil
}

// Progress is a running task's bytes done, for SaveProgress: the task,
// its partition (source endpoint) and the term it was claimed under.
type Progress struct {
	ID          int64
	SrcEndpoint string
	Term        int64
	Done        int64
}

// SaveProgress records the bytes done of owner's running tasks: only
// that column, a few hundred rows per statement, where UpdateTasksFenced
// writes every column (a server running ten thousand transfers saves
// their progress every two seconds). Rows no longer claimed under the
// given term, or terminal, are left alone; leases are checked as for
// UpdateTasksFenced.
func (s *sqlStore) SaveProgress(ctx context.Context, owner string, ps []Progress) error {
	if len(ps) == 0 {
		return nil
	}
	numbered := s.dialect == dialectPostgres
	parts := map[string]bool{}
	for _, p := range ps {
		parts[p.SrcEndpoint] = true
	}
	names := slices.Sorted(maps.Keys(parts))
	err := s.inTx(ctx, func(tx *stx) error {
		if err := s.checkLeases(ctx, tx, owner, names, func(held map[string]int64) []string {
			var stale []string
			for _, p := range ps {
				if term, ok := held[p.SrcEndpoint]; !ok || term != p.Term {
					stale = append(stale, p.SrcEndpoint)
				}
			}
			return stale
		}); err != nil {
			return err
		}
		const batch = 1000
		types := []string{"BIGINT", "BIGINT", "BIGINT"}
		for lo := 0; lo < len(ps); lo += batch {
			chunk := ps[lo:min(lo+batch, len(ps))]
			var b strings.Builder
			b.WriteString(`UPDATE tasks SET done = v.column2 FROM (VALUES `)
			writeValues(&b, len(chunk), 3, numbered, types)
			b.WriteString(`) AS v WHERE tasks.id = v.column1 AND tasks.claim = v.column3 AND tasks.state NOT IN ` + terminalSQL)
			args := make([]any, 0, 3*len(chunk))
			for _, p := range chunk {
				args = append(args, p.ID, p.Done, p.Term)
			}
			if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		var se *StaleTermError
		if errors.As(err, &se) {
			return err
		}
		return fmt.Errorf("store: save progress of %d tasks: %w", len(ps), err)
	}
	return nil
}

// fencedUpdateTypes are taskUpdateTypes plus the claimed term.
var fencedUpdateTypes = append(slices.Clone(taskUpdateTypes), "BIGINT")

// fencedUpdateSQL is taskUpdateSQL that writes a row only if it is still
// claimed under the given term and not terminal (but for canceled to
// done).
func fencedUpdateSQL(n int, numbered bool) string {
	var b strings.Builder
	b.WriteString(`UPDATE tasks SET state = v.column2, size = v.column3, src_endpoint = v.column4,
	dst_endpoint = v.column5, cc = v.column6, done = v.column7, attempts = v.column8,
	preemptions = v.column9, started = v.column10, finished = v.column11, wait = v.column12,
	trans = v.column13, checksum = v.column14, throughput = v.column15, error = v.column16
FROM (VALUES `)
	writeValues(&b, n, len(fencedUpdateTypes), numbered, fencedUpdateTypes)
	// A canceled task may still become done: its file was put in place
	// before the run heard of the cancel, and the store must say so.
	b.WriteString(`) AS v WHERE tasks.id = v.column1 AND tasks.claim = v.column17 AND (tasks.state NOT IN ` +
		terminalSQL + ` OR (tasks.state = 'canceled' AND v.column2 = 'done')) RETURNING tasks.id`)
	return b.String()
}

// inList is "($k, $k+1, ...)" (or "(?, ?, ...)") for n parameters after k-1.
func inList(k, n int, numbered bool) string {
	var b strings.Builder
	b.WriteByte('(')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		if numbered {
			b.WriteString("$" + strconv.Itoa(k+i))
		} else {
			b.WriteByte('?')
		}
	}
	b.WriteByte(')')
	return b.String()
}

// UpdateTasksFenced is UpdateTasks for the scheduler of a partitioned
// service: every task's Term must be the current term of its partition's
// lease, held by owner, or nothing is written and the error is a
// *StaleTermError naming the partitions lost. The leases are locked (FOR
// SHARE) for the transaction, so no change of hands can commit in
// between. Tasks that are terminal in the store (a user canceled the job
// through any server) are not written; their IDs are returned in
// skipped, and their audit entries dropped: the store has the final word
// on a cancel, except that a canceled task whose file was put in place
// anyway (the run was past its last check) is written as done. Audit entries of the batch's tasks get the task's term.
func (s *sqlStore) UpdateTasksFenced(ctx context.Context, owner string, tasks []Task, audit []AuditEntry) (skipped []int64, err error) {
	if len(tasks) == 0 && len(audit) == 0 {
		return nil, nil
	}
	tasks = lastPerID(tasks)
	numbered := s.dialect == dialectPostgres
	parts := map[string]bool{}
	terms := make(map[int64]int64, len(tasks))
	for _, t := range tasks {
		parts[t.SrcEndpoint] = true
		terms[t.ID] = t.Term
	}
	names := make([]string, 0, len(parts))
	for n := range parts {
		names = append(names, n)
	}
	slices.Sort(names)
	err = s.inTx(ctx, func(tx *stx) error {
		skipped = skipped[:0]
		if err := s.checkLeases(ctx, tx, owner, names, func(held map[string]int64) []string {
			var stale []string
			for _, t := range tasks {
				if term, ok := held[t.SrcEndpoint]; !ok || term != t.Term {
					stale = append(stale, t.SrcEndpoint)
				}
			}
			return stale
		}); err != nil {
			return err
		}
		args := make([]any, 0, min(len(tasks), taskUpdateBatch)*len(fencedUpdateTypes))
		updated := make(map[int64]bool, min(len(tasks), taskUpdateBatch))
		for start := 0; start < len(tasks); start += taskUpdateBatch {
			chunk := tasks[start:min(start+taskUpdateBatch, len(tasks))]
			args = args[:0]
			for i := range chunk {
				t := &chunk[i]
				args = append(args, t.ID, t.State, t.Size, t.SrcEndpoint, t.DstEndpoint, t.CC, t.Done,
					t.Attempts, t.Preemptions, toNanos(t.Started), toNanos(t.Finished), t.Wait, t.Trans,
					t.Checksum, t.Throughput, t.Error, t.Term)
			}
			rows, err := tx.QueryContext(ctx, fencedUpdateSQL(len(chunk), numbered), args...)
			if err != nil {
				return err
			}
			if err := scanIDs(rows, updated); err != nil {
				return err
			}
			for i := range chunk {
				id := chunk[i].ID
				if updated[id] {
					continue
				}
				var state string
				var claim int64
				err := tx.QueryRowContext(ctx, `SELECT state, claim FROM tasks WHERE id = $1`, id).Scan(&state, &claim)
				switch {
				case errors.Is(err, sql.ErrNoRows):
					return fmt.Errorf("task %d: %w", id, ErrNotFound)
				case err != nil:
					return err
				case Terminal(state):
					skipped = append(skipped, id)
				default:
					// The lease check passed, so only a claim under a
					// later term can explain it.
					return &StaleTermError{Partitions: []string{chunk[i].SrcEndpoint}}
				}
			}
		}
		keep := audit
		if len(skipped) > 0 {
			drop := make(map[int64]bool, len(skipped))
			for _, id := range skipped {
				drop[id] = true
			}
			keep = make([]AuditEntry, 0, len(audit))
			for _, a := range audit {
				if a.TaskID == 0 || !drop[a.TaskID] {
					keep = append(keep, a)
				}
			}
		}
		for i := range keep {
			if keep[i].Term == 0 && keep[i].TaskID != 0 {
				keep[i].Term = terms[keep[i].TaskID]
			}
		}
		return s.insertAudit(ctx, tx, keep)
	})
	if err != nil {
		var se *StaleTermError
		if errors.As(err, &se) {
			return nil, err
		}
		return nil, fmt.Errorf("store: update %d tasks: %w", len(tasks), err)
	}
	return skipped, nil
}

// CheckClaim returns nil if task taskID is still claimed under term and
// owner holds its partition's lease under that term, and a
// *StaleTermError otherwise: the last check before a scheduler puts a file
// in place, so that a server that lost the partition while its transfer
// ran does not finish the file the new owner is also moving.
func (s *sqlStore) CheckClaim(ctx context.Context, owner string, taskID, term int64) error {
	refused, err := checkClaimIn(ctx, s.r, owner, taskID, term)
	if err != nil {
		return err
	}
	return refused
}

// checkClaimIn is CheckClaim on q (the store's readers, or a
// transaction): refused says why the claim does not hold (the task is
// gone, or a *StaleTermError), err that the store could not be asked.
func checkClaimIn(ctx context.Context, q queryer, owner string, taskID, term int64) (refused, err error) {
	var part string
	var ok bool
	err = q.QueryRowContext(ctx, `SELECT t.src_endpoint, t.claim = $2 AND l.owner IS NOT NULL
		FROM tasks t LEFT JOIN leases l ON l.name = t.src_endpoint AND l.owner = $3 AND l.term = $2
		WHERE t.id = $1`, taskID, term, owner).Scan(&part, &ok)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("store: task %d: %w", taskID, ErrNotFound), nil
	case err != nil:
		return nil, fmt.Errorf("store: check claim of task %d: %w", taskID, err)
	case !ok:
		return &StaleTermError{Partitions: []string{part}}, nil
	}
	return nil, nil
}

// unclaimedPut is why a fenced checkpoint write of key for task taskID
// wrote nothing (err: the store could not be asked).
func unclaimedPut(ctx context.Context, q queryer, key, owner string, taskID, term int64) (refused, err error) {
	refused, err = checkClaimIn(ctx, q, owner, taskID, term)
	switch {
	case err != nil:
		return nil, err
	case refused != nil:
		return fmt.Errorf("store: put checkpoint %q: %w", key, refused), nil
	}
	return fmt.Errorf("store: put checkpoint %q: task %d not claimed under term %d", key, taskID, term), nil
}

// putFencedSQL writes a checkpoint if its task is claimed under the term
// and the owner holds the partition's lease under it. The WHERE clause
// also keeps SQLite from reading ON CONFLICT as part of a join (its
// upsert-after-SELECT ambiguity).
const putFencedSQL = `INSERT INTO checkpoints (key, data, updated)
		SELECT $1, $2, $3 FROM tasks t JOIN leases l ON l.name = t.src_endpoint AND l.owner = $5 AND l.term = $6
		WHERE t.id = $4 AND t.claim = $6
		ON CONFLICT (key) DO UPDATE SET data = excluded.data, updated = excluded.updated`

// CheckpointPut is one checkpoint of PutCheckpointsFenced: Data under
// Key, for task Task claimed under Term.
type CheckpointPut struct {
	Key        string
	Data       []byte
	Task, Term int64
}

// PutCheckpointsFenced implements Store.
func (s *sqlStore) PutCheckpointsFenced(ctx context.Context, owner string, puts []CheckpointPut) ([]error, error) {
	errs := make([]error, len(puts))
	if len(puts) == 0 {
		return errs, nil
	}
	now := toNanos(time.Now())
	err := s.inTx(ctx, func(tx *stx) error {
		st, err := tx.PrepareContext(ctx, putFencedSQL)
		if err != nil {
			return err
		}
		defer st.Close()
		for i, p := range puts {
			data := p.Data
			if data == nil {
				data = []byte{}
			}
			res, err := st.ExecContext(ctx, p.Key, data, now, p.Task, owner, p.Term)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil {
				return err
			} else if n > 0 {
				continue
			}
			// Stale, or the task is gone: the claim says which.
			if errs[i], err = unclaimedPut(ctx, tx, p.Key, owner, p.Task, p.Term); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: put %d checkpoints: %w", len(puts), err)
	}
	return errs, nil
}

// PutCheckpointFenced implements Store.
func (s *sqlStore) PutCheckpointFenced(ctx context.Context, key string, data []byte, owner string, taskID, term int64) error {
	if data == nil {
		data = []byte{} // the column is NOT NULL; nil would bind as NULL
	}
	res, err := s.w.ExecContext(ctx, putFencedSQL, key, data, toNanos(time.Now()), taskID, owner, term)
	if err != nil {
		return fmt.Errorf("store: put checkpoint %q: %w", key, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("store: put checkpoint %q: %w", key, err)
	}
	if n == 0 {
		// Stale, or the task is gone: the claim says which.
		refused, err := unclaimedPut(ctx, s.r, key, owner, taskID, term)
		if err != nil {
			return fmt.Errorf("store: put checkpoint %q: %w", key, err)
		}
		return refused
	}
	return nil
}

// CanceledJobs returns the IDs of jobs canceled at or after since (by
// their finish time), so that every server stops its share of a job
// canceled through another.
func (s *sqlStore) CanceledJobs(ctx context.Context, since time.Time) ([]int64, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id FROM jobs WHERE state = 'canceled' AND finished >= $1 ORDER BY id`, toNanos(since))
	if err != nil {
		return nil, fmt.Errorf("store: canceled jobs: %w", err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("store: canceled jobs: %w", err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: canceled jobs: %w", err)
	}
	return out, nil
}

// PutEndpointLoads replaces server's published loads with loads (stamped
// with the database's clock).
func (s *sqlStore) PutEndpointLoads(ctx context.Context, server string, loads []EndpointLoad) error {
	numbered := s.dialect == dialectPostgres
	err := s.inTx(ctx, func(tx *stx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM endpoint_load WHERE server = $1`, server); err != nil {
			return err
		}
		const batch = 256
		for start := 0; start < len(loads); start += batch {
			chunk := loads[start:min(start+batch, len(loads))]
			args := make([]any, 0, len(chunk)*4)
			for _, l := range chunk {
				args = append(args, server, l.Endpoint, l.CC, l.Throughput)
			}
			var b strings.Builder
			b.WriteString(`INSERT INTO endpoint_load (server, endpoint, cc, throughput, at) SELECT v.column1, v.column2, v.column3, v.column4, ` +
				s.nowSQL() + ` FROM (VALUES `)
			writeValues(&b, len(chunk), 4, numbered, []string{"TEXT", "TEXT", "INTEGER", "DOUBLE PRECISION"})
			b.WriteString(`) AS v`)
			if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: endpoint loads of %s: %w", server, err)
	}
	return nil
}

// EndpointLoads returns the loads other servers than except published
// within maxAge.
func (s *sqlStore) EndpointLoads(ctx context.Context, except string, maxAge time.Duration) ([]EndpointLoad, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT server, endpoint, cc, throughput, at FROM endpoint_load
		WHERE server <> $1 AND at > `+s.nowSQL()+` - $2 ORDER BY server, endpoint`, except, int64(maxAge))
	if err != nil {
		return nil, fmt.Errorf("store: endpoint loads: %w", err)
	}
	defer rows.Close()
	var out []EndpointLoad
	for rows.Next() {
		var l EndpointLoad
		var at int64
		if err := rows.Scan(&l.Server, &l.Endpoint, &l.CC, &l.Throughput, &at); err != nil {
			return nil, fmt.Errorf("store: endpoint loads: %w", err)
		}
		l.At = fromNanos(at)
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: endpoint loads: %w", err)
	}
	return out, nil
}

// FinishJobIfDone finishes the job if none of its tasks is active any
// more: failed if one failed, done otherwise. It returns the job's state
// afterwards (StateActive if some task is still active). Several servers
// may schedule one job's files; whichever sees the last one end finishes
// it, and a race between two is settled by the state-conditional update.
func (s *sqlStore) FinishJobIfDone(ctx context.Context, id int64, at time.Time, actor string) (string, error) {
	var out string
	err := s.inTx(ctx, func(tx *stx) error {
		prev, err := jobState(ctx, tx, id)
		if err != nil {
			return err
		}
		if Terminal(prev) {
			out = prev
			return nil
		}
		var active, failed int
		if err := tx.QueryRowContext(ctx, `SELECT
			COALESCE(SUM(CASE WHEN state NOT IN `+terminalSQL+` THEN 1 ELSE 0 END), 0),
			COALESCE(SUM(CASE WHEN state = 'failed' THEN 1 ELSE 0 END), 0)
			FROM tasks WHERE job_id = $1`, id).Scan(&active, &failed); err != nil {
			return err
		}
		if active == 0 {
			// Nor is a job done while a directory of it is being
			// listed (more files may come), and one whose listing
			// stopped with an error left files uncopied.
			var listing, broken int
			if err := tx.QueryRowContext(ctx, `SELECT
				COALESCE(SUM(CASE WHEN NOT done THEN 1 ELSE 0 END), 0),
				COALESCE(SUM(CASE WHEN error <> '' THEN 1 ELSE 0 END), 0)
				FROM listings WHERE job_id = $1`, id).Scan(&listing, &broken); err != nil {
				return err
			}
			active, failed = listing, failed+broken
		}
		if active > 0 {
			out = prev
			return nil
		}
		out = StateDone
		if failed > 0 {
			out = StateFailed
		}
		if err := setJobState(ctx, tx, id, prev, out, at); err != nil {
			return err
		}
		return s.insertAudit(ctx, tx, []AuditEntry{{At: at, JobID: id, Actor: actor, From: prev, To: out}})
	})
	if errors.Is(err, ErrConflict) {
		// Another server finished (or a user canceled) it meanwhile.
		st, err2 := s.jobStateRead(ctx, id)
		if err2 != nil {
			return "", fmt.Errorf("store: finish job %d: %w", id, err2)
		}
		return st, nil
	}
	if err != nil {
		return "", fmt.Errorf("store: finish job %d: %w", id, err)
	}
	return out, nil
}

func (s *sqlStore) jobStateRead(ctx context.Context, id int64) (string, error) {
	var state string
	err := s.r.QueryRowContext(ctx, `SELECT state FROM jobs WHERE id = $1`, id).Scan(&state)
	if errors.Is(err, sql.ErrNoRows) {
		return "", ErrNotFound
	}
	return state, err
}

// Notify sends a wake-up hint on channel to every server listening
// (PostgreSQL NOTIFY; nothing on SQLite, where one server runs). Hints
// may be lost: listeners also poll.
func (s *sqlStore) Notify(ctx context.Context, channel string) error {
	if s.dialect != dialectPostgres {
		return nil
	}
	if _, err := s.w.ExecContext(ctx, `SELECT pg_notify($1, '')`, channel); err != nil {
		return fmt.Errorf("store: notify %s: %w", channel, err)
	}
	return nil
}

// Listen delivers a value on the returned channel for each hint on
// channel (coalesced: a slow reader sees one for many) until ctx ends. On
// SQLite it returns a nil channel, which never fires. The PostgreSQL
// listener has its own connection, reconnected after errors.
func (s *sqlStore) Listen(ctx context.Context, channel string) <-chan struct{} {
	if s.dialect != dialectPostgres || s.pgConfig == nil {
		return nil
	}
	out := make(chan struct{}, 1)
	go func() {
		wait := 100 * time.Millisecond
		for ctx.Err() == nil {
			err := s.listenOnce(ctx, channel, out)
			if ctx.Err() != nil {
				return
			}
			_ = err // a lost listener only delays work until the next poll
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			wait = min(2*wait, 5*time.Second)
		}
	}()
	return out
}

func (s *sqlStore) listenOnce(ctx context.Context, channel string, out chan<- struct{}) error {
	conn, err := pgx.ConnectConfig(ctx, s.pgConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return err
	}
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		select {
		case out <- struct{}{}:
		default:
		}
	}
}
