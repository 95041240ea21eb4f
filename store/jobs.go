package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Rows per multi-row INSERT of tasks in CreateJob (22 parameters each,
// below SQLite's 32766 and PostgreSQL's 65535 parameter limits). Measured
// with BenchmarkCreateJob100k (100,000 tasks, 2-core machine, loaded):
//
//	rows/INSERT     1      64     256    512    1024
//	SQLite          3.1s   1.2s   1.0s   1.0s   1.5s
//	PostgreSQL     15s     2.8s   1.9s   1.9s   2.0s
//
// One row per statement costs a round trip per task on PostgreSQL; past
// a few hundred rows the statement cost is amortized and the time is the
// server's (PostgreSQL needs about 1 s for INSERT ... SELECT of 100,000
// such rows with their indexes and foreign key; passing columns as arrays
// to unnest() was no faster than 512-row VALUES lists).
const (
	sqliteTaskBatch   = 256
	postgresTaskBatch = 512
)

// terminalSQL is the SQL form of Terminal, as in the tasks_active index
// predicate (which queries must repeat verbatim for the planner to use
// the partial index).
const terminalSQL = `('done', 'failed', 'canceled')`

// --- jobs ---

// jobsSQL is the query behind Job and Jobs: a page of jobs (selected by
// where, newest first, at most limit) with their owners' names and their
// task counters, computed by one grouped query over the page's tasks
// (which uses the tasks (job_id, idx) index, not a scan of all tasks).
//
// The byte sums cannot overflow, whatever the rows hold: a plain SUM of
// the sizes raised "integer overflow" on SQLite (and "bigint out of
// range" at the CAST on PostgreSQL) for a job of two files of 2^63-1
// bytes, and every listing that held the job failed, the server's start
// included. Each term is clamped to [0, MaxSize] and summed in two
// parts, its multiples of 2^30 and its remainder, each far from int64's
// limit for any number of rows a job can have; sumBytes joins them,
// saturating. The sums stay exact (a float sum would not be past 2^53).
func jobsSQL(where, limit string) string {
	size := clampSQL(`size`)
	done := clampSQL(`CASE WHEN state IN ('failed', 'canceled') THEN 0 ELSE done END`)
	return `WITH page AS (
	SELECT * FROM jobs` + where + ` ORDER BY id DESC LIMIT ` + limit + `
), counts AS (
	SELECT job_id,
		COUNT(*) AS files,
		SUM(CASE WHEN state = 'done' THEN 1 ELSE 0 END) AS files_done,
		SUM(CASE WHEN state = 'failed' THEN 1 ELSE 0 END) AS files_failed,
		SUM(CASE WHEN state = 'canceled' THEN 1 ELSE 0 END) AS files_canceled,
		SUM(CASE WHEN state = 'done' AND error = '` + NoteInPlace + `' THEN 1 ELSE 0 END) AS files_in_place,
		CAST(SUM(` + size + ` / ` + sumSplitSQL + `) AS BIGINT) AS bytes_hi,
		CAST(SUM(` + size + ` % ` + sumSplitSQL + `) AS BIGINT) AS bytes_lo,
		CAST(SUM(` + done + ` / ` + sumSplitSQL + `) AS BIGINT) AS done_hi,
		CAST(SUM(` + done + ` % ` + sumSplitSQL + `) AS BIGINT) AS done_lo
	FROM tasks WHERE job_id IN (SELECT id FROM page) GROUP BY job_id
)
SELECT p.id, p.owner_id, u.name, p.vo, p.submission_id, p.label, p.class, p.priority, p.deadline,
	p.verify_checksum, p.checksum, p.retry, p.optimize, p.streams, p.adaptive, p.selection, p.overwrite, p.preserve_mtime, p.state, p.created, p.finished,
	COALESCE(c.files, 0), COALESCE(c.files_done, 0), COALESCE(c.files_failed, 0),
	COALESCE(c.files_canceled, 0), COALESCE(c.files_in_place, 0), COALESCE(c.bytes_hi, 0), COALESCE(c.bytes_lo, 0),
	COALESCE(c.done_hi, 0), COALESCE(c.done_lo, 0),
	EXISTS (SELECT 1 FROM listings l WHERE l.job_id = p.id AND NOT l.done),
	COALESCE((SELECT MIN(l.error) FROM listings l WHERE l.job_id = p.id AND l.error <> ''), '')
FROM page p JOIN users u ON u.id = p.owner_id LEFT JOIN counts c ON c.job_id = p.id
ORDER BY p.id DESC`
}

// sumSplit is where jobsSQL splits each byte count for its sums.
const (
	sumSplitBits = 30
	sumSplitSQL  = `1073741824` // 1 << sumSplitBits
)

// clampSQL is the SQL of expr clamped to [0, MaxSize], with CASE, which
// both dialects have (SQLite's two-argument min is PostgreSQL's LEAST).
func clampSQL(expr string) string {
	m := strconv.FormatInt(MaxSize, 10)
	return `(CASE WHEN ` + expr + ` <= 0 THEN 0 WHEN ` + expr + ` > ` + m + ` THEN ` + m + ` ELSE ` + expr + ` END)`
}

// sumBytes joins the two parts of a byte sum of jobsSQL, hi·2^30 + lo,
// saturating at the largest int64 (which no sum of a job the service
// took reaches: a job's files add up to at most MaxSize).
func sumBytes(hi, lo int64) int64 {
	if hi < 0 || lo < 0 {
		return 0 // cannot happen: the terms are clamped at 0
	}
	if hi > (math.MaxInt64-lo)>>sumSplitBits {
		return math.MaxInt64
	}
	return hi<<sumSplitBits + lo
}

// AddBytes is a + b for byte counts that are each at least 0, saturating
// at the largest int64 instead of wrapping to a negative count.
func AddBytes(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func scanJob(row scanner) (Job, error) {
	var j Job
	var deadline, created, finished, bytesHi, bytesLo, doneHi, doneLo int64
	err := row.Scan(&j.ID, &j.OwnerID, &j.Owner, &j.VO, &j.SubmissionID, &j.Label, &j.Class, &j.Priority,
		&deadline, &j.VerifyChecksum, &j.Checksum, &j.Retry, &j.Optimize, &j.Streams, &j.Adaptive, &j.Selection, &j.Overwrite, &j.PreserveModTime, &j.State, &created, &finished,
		&j.Files, &j.FilesDone, &j.FilesFailed, &j.FilesCanceled, &j.FilesInPlace, &bytesHi, &bytesLo, &doneHi, &doneLo, &j.Listing, &j.ListingError)
	if err != nil {
		return Job{}, err
	}
	j.Bytes, j.BytesDone = sumBytes(bytesHi, bytesLo), sumBytes(doneHi, doneLo)
	j.Deadline, j.Created, j.Finished = fromNanos(deadline), fromNanos(created), fromNanos(finished)
	return j, nil
}

var (
	jobByIDSQL         = jobsSQL(` WHERE id = $1`, `1`)
	jobBySubmissionSQL = jobsSQL(` WHERE owner_id = $1 AND submission_id = $2 AND submission_id <> ''`, `1`)
)

func (s *sqlStore) Job(ctx context.Context, id int64) (Job, error) {
	j, err := scanJob(s.r.QueryRowContext(ctx, jobByIDSQL, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Job{}, fmt.Errorf("store: job %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Job{}, fmt.Errorf("store: job %d: %w", id, err)
	}
	err = s.r.QueryRowContext(ctx, `SELECT metadata FROM file_metadata WHERE job_id = $1 AND idx = -1`, id).Scan(&j.Metadata)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return Job{}, fmt.Errorf("store: metadata of job %d: %w", id, err)
	}
	return j, nil
}

// jobBySubmission returns the owner's job with the submission id.
func jobBySubmission(ctx context.Context, q queryer, owner int64, submission string) (Job, error) {
	j, err := scanJob(q.QueryRowContext(ctx, jobBySubmissionSQL, owner, submission))
	if errors.Is(err, sql.ErrNoRows) {
		return Job{}, ErrNotFound
	}
	return j, err
}

func (s *sqlStore) Jobs(ctx context.Context, f JobFilter) ([]Job, error) {
	var conds []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if f.OwnerID != 0 {
		conds = append(conds, "owner_id = "+arg(f.OwnerID))
	}
	if f.VO != "" {
		conds = append(conds, "vo = "+arg(f.VO))
	}
	if f.State != "" {
		conds = append(conds, "state = "+arg(f.State))
	}
	if f.Search != "" {
		conds = append(conds, "LOWER(label) LIKE "+arg(likePattern(f.Search))+` ESCAPE '\'`)
	}
	if f.Before != 0 {
		conds = append(conds, "id < "+arg(f.Before))
	}
	where := ""
	if len(conds) > 0 {
		where = " WHERE " + strings.Join(conds, " AND ")
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.r.QueryContext(ctx, jobsSQL(where, arg(limit)), args...)
	if err != nil {
		return nil, fmt.Errorf("store: jobs: %w", err)
	}
	defer rows.Close()
	var out []Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, fmt.Errorf("store: jobs: %w", err)
		}
		out = append(out, j)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: jobs: %w", err)
	}
	return out, nil
}

// CreateJob inserts j and its tasks in one transaction.
//
// Defaults: an empty j.State is StateActive, a zero j.Created is now, a
// task's empty State is StateResolving (Size < 0) or StateQueued, and a
// zero task Arrival is j.Created; these are written back to *j and tasks
// along with the IDs. Task Index values must be unique within the job.
//
// Idempotency: with a SubmissionID, an existing job of the owner is looked
// up first (the common resubmission case, without taking the write lock);
// if two submissions race past that, the jobs_submission unique index makes
// the second INSERT a no-op (ON CONFLICT DO NOTHING, which on PostgreSQL
// waits for the first transaction to commit), and the second returns the
// first's job.
//
// The tasks go in with multi-row INSERTs of s.taskBatch rows through one
// prepared statement; RETURNING gives back (id, idx) pairs, matched to the
// tasks by idx since neither dialect guarantees RETURNING's row order.
func (s *sqlStore) CreateJob(ctx context.Context, j *Job, tasks []Task) (bool, error) {
	fail := func(err error) error {
		return fmt.Errorf("store: create job (owner %d, submission %q): %w", j.OwnerID, j.SubmissionID, err)
	}
	if j.SubmissionID != "" {
		old, err := jobBySubmission(ctx, s.r, j.OwnerID, j.SubmissionID)
		if err == nil {
			*j = old
			return false, nil
		}
		if !errors.Is(err, ErrNotFound) {
			return false, fail(err)
		}
	}

	nj := *j
	nj.ID = 0
	if nj.State == "" {
		nj.State = StateActive
	}
	if nj.Created.IsZero() {
		nj.Created = time.Now().UTC()
	}
	ids := make([]int64, len(tasks))
	created := false
	err := s.inTx(ctx, func(tx *stx) error {
		err := tx.QueryRowContext(ctx, `SELECT name FROM users WHERE id = $1`, nj.OwnerID).Scan(&nj.Owner)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("user %d: %w", nj.OwnerID, ErrNotFound)
		}
		if err != nil {
			return err
		}
		err = tx.QueryRowContext(ctx,
			`INSERT INTO jobs (owner_id, vo, submission_id, label, class, priority, deadline,
				verify_checksum, checksum, retry, optimize, streams, adaptive, selection, overwrite, preserve_mtime, state, created, finished)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)
			ON CONFLICT (owner_id, submission_id) WHERE submission_id <> '' DO NOTHING
			RETURNING id`,
			nj.OwnerID, nj.VO, nj.SubmissionID, nj.Label, nj.Class, nj.Priority, toNanos(nj.Deadline),
			nj.VerifyChecksum, nj.Checksum, nj.Retry, nj.Optimize, nj.Streams, nj.Adaptive, nj.Selection, nj.Overwrite, nj.PreserveModTime, nj.State, toNanos(nj.Created), toNanos(nj.Finished),
		).Scan(&nj.ID)
		if errors.Is(err, sql.ErrNoRows) {
			return nil // lost a race with the same submission: read it below
		}
		if err != nil {
			return fmt.Errorf("insert job: %w", err)
		}
		created = true
		if err := insertListings(ctx, tx, nj.ID, nj.Listings); err != nil {
			return err
		}
		if err := insertMetadata(ctx, tx, nj, tasks); err != nil {
			return err
		}
		return s.insertTasks(ctx, tx, nj, tasks, ids)
	})
	if err != nil {
		return false, fail(err)
	}
	if created {
		// Its client is told the job was accepted: it must survive a
		// power loss, not only a killed server.
		if err := s.durableCommit(); err != nil {
			return false, fail(fmt.Errorf("job %d was stored but not made durable: %w", nj.ID, err))
		}
	}
	if !created {
		old, err := jobBySubmission(ctx, s.w, j.OwnerID, j.SubmissionID)
		if err != nil {
			return false, fail(fmt.Errorf("read concurrent submission: %w", err))
		}
		*j = old
		return false, nil
	}

	// Committed: publish IDs and defaults, and the counters Job would read.
	nj.Files, nj.FilesDone, nj.FilesFailed, nj.FilesCanceled, nj.FilesInPlace, nj.Bytes, nj.BytesDone = len(tasks), 0, 0, 0, 0, 0, 0
	for i := range tasks {
		t := &tasks[i]
		t.ID, t.JobID = ids[i], nj.ID
		t.State = taskState(t)
		if t.Arrival.IsZero() {
			t.Arrival = nj.Created
		}
		switch t.State {
		case StateDone:
			nj.FilesDone++
		case StateFailed:
			nj.FilesFailed++
		case StateCanceled:
			nj.FilesCanceled++
		}
		// As Job counts them: clamped, saturating.
		nj.Bytes = AddBytes(nj.Bytes, clampBytes(t.Size))
		if t.State != StateFailed && t.State != StateCanceled {
			nj.BytesDone = AddBytes(nj.BytesDone, clampBytes(t.Done))
		}
	}
	*j = nj
	return true, nil
}

// clampBytes is n clamped to [0, MaxSize], as jobsSQL counts a term.
func clampBytes(n int64) int64 { return min(max(n, 0), MaxSize) }

// taskState is the state CreateJob stores for t.
func taskState(t *Task) string {
	switch {
	case t.State != "":
		return t.State
	case t.Size < 0:
		return StateResolving
	default:
		return StateQueued
	}
}

const (
	taskInsertCols = `job_id, idx, src, dst, src_endpoint, dst_endpoint, size, expected, batch, state,
	cc, done, attempts, preemptions, arrival, started, finished, wait, trans, checksum, throughput, error, replicas`
	nTaskInsertCols = 23
)

// writeValues writes rows tuples of cols placeholders for a multi-row
// VALUES list: ($1,$2),($3,$4),... if numbered (PostgreSQL), else
// (?,?),(?,?),... (SQLite). types, if set, are SQL types the first row's
// placeholders are CAST to, for VALUES lists whose column types
// PostgreSQL cannot infer from an INSERT target.
//
// Unlike everywhere else, SQLite gets anonymous placeholders here: the
// driver asks SQLite for each parameter's name, which SQLite finds by a
// linear scan of the statement's named parameters, so binding n numbered
// parameters costs O(n²). With a 256-row task INSERT (5,632 parameters)
// that made inserting 100,000 tasks take 18 s instead of 1 s. Anonymous
// parameters have no name to look up; they bind in order.
func writeValues(b *strings.Builder, rows, cols int, numbered bool, types []string) {
	p := 1
	for r := range rows {
		if r > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('(')
		for c := range cols {
			if c > 0 {
				b.WriteByte(',')
			}
			if r == 0 && types != nil {
				b.WriteString("CAST(")
			}
			if numbered {
				b.WriteByte('$')
				b.WriteString(strconv.Itoa(p))
				p++
			} else {
				b.WriteByte('?')
			}
			if r == 0 && types != nil {
				b.WriteString(" AS " + types[c] + ")")
			}
		}
		b.WriteByte(')')
	}
}

// taskInsertSQL is a multi-row INSERT of n tasks.
func taskInsertSQL(n int, numbered bool) string {
	var b strings.Builder
	b.WriteString("INSERT INTO tasks (" + taskInsertCols + ") VALUES ")
	writeValues(&b, n, nTaskInsertCols, numbered, nil)
	b.WriteString(" RETURNING id, idx")
	return b.String()
}

// insertTasks inserts tasks for job j and stores their IDs in ids.
func (s *sqlStore) insertTasks(ctx context.Context, tx *stx, j Job, tasks []Task, ids []int64) error {
	if len(tasks) == 0 {
		return nil
	}
	batch := min(s.taskBatch, len(tasks))
	numbered := s.dialect == dialectPostgres
	full, err := tx.PrepareContext(ctx, taskInsertSQL(batch, numbered))
	if err != nil {
		return fmt.Errorf("prepare task insert: %w", err)
	}
	defer full.Close()
	args := make([]any, 0, batch*nTaskInsertCols)
	for start := 0; start < len(tasks); start += batch {
		chunk := tasks[start:min(start+batch, len(tasks))]
		args = args[:0]
		for i := range chunk {
			t := &chunk[i]
			arrival := t.Arrival
			if arrival.IsZero() {
				arrival = j.Created
			}
			args = append(args, j.ID, t.Index, t.Src, t.Dst, t.SrcEndpoint, t.DstEndpoint, t.Size, t.Expected,
				t.Batch, taskState(t), t.CC, t.Done, t.Attempts, t.Preemptions, toNanos(arrival),
				toNanos(t.Started), toNanos(t.Finished), t.Wait, t.Trans, t.Checksum, t.Throughput, t.Error, replicasText(t.Replicas))
		}
		var rows *sql.Rows
		if len(chunk) == batch {
			rows, err = full.QueryContext(ctx, args...)
		} else {
			rows, err = tx.QueryContext(ctx, taskInsertSQL(len(chunk), numbered), args...)
		}
		if err != nil {
			return fmt.Errorf("insert tasks %d..%d: %w", start, start+len(chunk)-1, err)
		}
		if err := collectTaskIDs(rows, chunk, ids[start:]); err != nil {
			return fmt.Errorf("insert tasks %d..%d: %w", start, start+len(chunk)-1, err)
		}
	}
	return nil
}

// collectTaskIDs reads RETURNING (id, idx) rows into ids, matching rows
// to chunk by idx. Rows normally come back in VALUES order, which is
// checked first; otherwise a map of the chunk's indexes is built.
func collectTaskIDs(rows *sql.Rows, chunk []Task, ids []int64) error {
	defer rows.Close()
	var byIdx map[int]int
	n := 0
	for k := 0; rows.Next(); k++ {
		var id int64
		var idx int
		if err := rows.Scan(&id, &idx); err != nil {
			return err
		}
		pos := k
		if pos >= len(chunk) || chunk[pos].Index != idx {
			if byIdx == nil {
				byIdx = make(map[int]int, len(chunk))
				for i := range chunk {
					byIdx[chunk[i].Index] = i
				}
			}
			var ok bool
			if pos, ok = byIdx[idx]; !ok {
				return fmt.Errorf("RETURNING gave unknown idx %d", idx)
			}
		}
		ids[pos] = id
		n++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if n != len(chunk) {
		return fmt.Errorf("RETURNING gave %d rows for %d tasks", n, len(chunk))
	}
	return nil
}

// --- tasks ---

// replicasText is how a task's replicas are stored: a JSON list, or ""
// for none (most tasks).
func replicasText(rs []string) string {
	if len(rs) == 0 {
		return ""
	}
	b, _ := json.Marshal(rs)
	return string(b)
}

const taskCols = `id, job_id, idx, src, dst, src_endpoint, dst_endpoint, size, expected, batch, state,
	cc, done, attempts, preemptions, arrival, started, finished, wait, trans, checksum, throughput, error, replicas, claim`

func scanTask(row scanner) (Task, error) {
	var t Task
	var arrival, started, finished int64
	var replicas string
	err := row.Scan(&t.ID, &t.JobID, &t.Index, &t.Src, &t.Dst, &t.SrcEndpoint, &t.DstEndpoint, &t.Size,
		&t.Expected, &t.Batch, &t.State, &t.CC, &t.Done, &t.Attempts, &t.Preemptions, &arrival, &started,
		&finished, &t.Wait, &t.Trans, &t.Checksum, &t.Throughput, &t.Error, &replicas, &t.Term)
	if err != nil {
		return Task{}, err
	}
	if replicas != "" {
		if err := json.Unmarshal([]byte(replicas), &t.Replicas); err != nil {
			return Task{}, fmt.Errorf("task %d: replicas %q: %w", t.ID, replicas, err)
		}
	}
	t.Arrival, t.Started, t.Finished = fromNanos(arrival), fromNanos(started), fromNanos(finished)
	return t, nil
}

func (s *sqlStore) queryTasks(ctx context.Context, what, q string, args ...any) ([]Task, error) {
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", what, err)
	}
	defer rows.Close()
	var out []Task
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, fmt.Errorf("store: %s: %w", what, err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: %s: %w", what, err)
	}
	return out, nil
}

// insertMetadata keeps what the submitter attached to the job and its
// files (file_metadata; idx -1 is the job's).
func insertMetadata(ctx context.Context, tx *stx, j Job, tasks []Task) error {
	put := func(idx int, md string) error {
		if md == "" {
			return nil
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO file_metadata (job_id, idx, metadata) VALUES ($1, $2, $3)`, j.ID, idx, md); err != nil {
			return fmt.Errorf("insert metadata of job %d item %d: %w", j.ID, idx, err)
		}
		return nil
	}
	if err := put(-1, j.Metadata); err != nil {
		return err
	}
	for i := range tasks {
		if err := put(tasks[i].Index, tasks[i].Metadata); err != nil {
			return err
		}
	}
	return nil
}

// Tasks lists the job's tasks with Index >= from, by Index, at most limit
// (all if limit <= 0), with their metadata. A job without tasks, or no
// job, gives none.
func (s *sqlStore) Tasks(ctx context.Context, jobID int64, from, limit int) ([]Task, error) {
	return s.tasksOf(ctx, jobID, "", from, limit)
}

// TasksInState lists the job's tasks in state with Index >= from, by
// Index, at most limit (all if limit <= 0), with their metadata.
func (s *sqlStore) TasksInState(ctx context.Context, jobID int64, state string, from, limit int) ([]Task, error) {
	if state == "" {
		return nil, fmt.Errorf("store: tasks of job %d in a state: no state given", jobID)
	}
	return s.tasksOf(ctx, jobID, state, from, limit)
}

// tasksOf is Tasks, of one state only unless state is "".
func (s *sqlStore) tasksOf(ctx context.Context, jobID int64, state string, from, limit int) ([]Task, error) {
	what := fmt.Sprintf("tasks of job %d", jobID)
	cond := ``
	args := []any{jobID, from}
	if state != "" {
		what += " in state " + state
		args = append(args, state)
		cond = fmt.Sprintf(` AND state = $%d`, len(args))
	}
	q := `SELECT ` + taskCols + `, COALESCE((SELECT m.metadata FROM file_metadata m WHERE m.job_id = tasks.job_id AND m.idx = tasks.idx), '')
		FROM tasks WHERE job_id = $1 AND idx >= $2` + cond + ` ORDER BY idx`
	if limit > 0 {
		args = append(args, limit)
		q += fmt.Sprintf(` LIMIT $%d`, len(args))
	}
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", what, err)
	}
	defer rows.Close()
	var out []Task
	for rows.Next() {
		var md string
		t, err := scanTask(rowWith{rows, &md})
		if err != nil {
			return nil, fmt.Errorf("store: %s: %w", what, err)
		}
		t.Metadata = md
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: %s: %w", what, err)
	}
	return out, nil
}

// rowWith scans a row whose columns are another scan's and then extra.
type rowWith struct {
	r     scanner
	extra any
}

func (w rowWith) Scan(dest ...any) error { return w.r.Scan(append(dest, w.extra)...) }

// ActiveTasks reads the non-terminal tasks through the tasks_active
// partial index.
func (s *sqlStore) ActiveTasks(ctx context.Context) ([]Task, error) {
	return s.queryTasks(ctx, "active tasks",
		`SELECT `+taskCols+` FROM tasks WHERE state NOT IN `+terminalSQL+` ORDER BY id`)
}

// EndedWithCheckpoint returns the terminal tasks that still have a
// checkpoint ("task/ID"), by ID. A checkpoint outlives its task when the
// cleanup of a canceled or failed task could not reach the destination
// (its partial file is still there), or when the run's last journal
// write landed after the cleanup: both owe a cleanup.
func (s *sqlStore) EndedWithCheckpoint(ctx context.Context) ([]Task, error) {
	// From the checkpoints (few: one per running task, and those owed),
	// not from the tasks (millions).
	rows, err := s.r.QueryContext(ctx, `SELECT key FROM checkpoints WHERE key LIKE 'task/%'`)
	if err != nil {
		return nil, fmt.Errorf("store: checkpoints of tasks: %w", err)
	}
	var ids []any
	for rows.Next() {
		var key string
		if err := rows.Scan(&key); err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: checkpoints of tasks: %w", err)
		}
		if id, err := strconv.ParseInt(strings.TrimPrefix(key, "task/"), 10, 64); err == nil {
			ids = append(ids, id)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: checkpoints of tasks: %w", err)
	}
	var out []Task
	numbered := s.dialect == dialectPostgres
	for lo := 0; lo < len(ids); lo += 500 {
		chunk := ids[lo:min(lo+500, len(ids))]
		ts, err := s.queryTasks(ctx, "ended tasks with checkpoints",
			`SELECT `+taskCols+` FROM tasks WHERE id IN `+inList(1, len(chunk), numbered)+` AND state IN `+terminalSQL, chunk...)
		if err != nil {
			return nil, err
		}
		out = append(out, ts...)
	}
	slices.SortFunc(out, func(a, b Task) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// Rows per statement in UpdateTasks and audit inserts (16 and 7
// parameters per row).
const (
	taskUpdateBatch = 256
	auditBatch      = 256
)

// taskUpdateTypes are the SQL types of the columns of taskUpdateSQL's
// VALUES list (valid in both dialects).
var taskUpdateTypes = []string{"BIGINT", "TEXT", "BIGINT", "TEXT", "TEXT", "INTEGER", "BIGINT", "INTEGER",
	"INTEGER", "BIGINT", "BIGINT", "DOUBLE PRECISION", "DOUBLE PRECISION", "TEXT", "DOUBLE PRECISION", "TEXT"}

// taskUpdateSQL updates n tasks from a VALUES list (id first, then the
// mutable fields) and returns the IDs it updated. Both dialects support
// UPDATE ... FROM and name the columns of an unaliased VALUES list
// column1, column2, ...; both plan it as a loop over the list with a
// primary-key lookup per row.
func taskUpdateSQL(n int, numbered bool) string {
	var b strings.Builder
	b.WriteString(`UPDATE tasks SET state = v.column2, size = v.column3, src_endpoint = v.column4,
	dst_endpoint = v.column5, cc = v.column6, done = v.column7, attempts = v.column8,
	preemptions = v.column9, started = v.column10, finished = v.column11, wait = v.column12,
	trans = v.column13, checksum = v.column14, throughput = v.column15, error = v.column16
FROM (VALUES `)
	writeValues(&b, n, len(taskUpdateTypes), numbered, taskUpdateTypes)
	b.WriteString(`) AS v WHERE tasks.id = v.column1 RETURNING tasks.id`)
	return b.String()
}

// UpdateTasks writes the tasks' mutable fields and appends the audit
// entries in one transaction, both with multi-row statements (a round
// trip per 256 tasks rather than per task on PostgreSQL). If a task
// appears more than once, its last entry wins, as if the updates were
// applied in order. A task that does not exist fails the whole call with
// ErrNotFound.
func (s *sqlStore) UpdateTasks(ctx context.Context, tasks []Task, audit []AuditEntry) error {
	if len(tasks) == 0 && len(audit) == 0 {
		return nil
	}
	tasks = lastPerID(tasks)
	numbered := s.dialect == dialectPostgres
	err := s.inTx(ctx, func(tx *stx) error {
		var full *sql.Stmt
		args := make([]any, 0, min(len(tasks), taskUpdateBatch)*len(taskUpdateTypes))
		updated := make(map[int64]bool, min(len(tasks), taskUpdateBatch))
		for start := 0; start < len(tasks); start += taskUpdateBatch {
			chunk := tasks[start:min(start+taskUpdateBatch, len(tasks))]
			args = args[:0]
			for i := range chunk {
				t := &chunk[i]
				args = append(args, t.ID, t.State, t.Size, t.SrcEndpoint, t.DstEndpoint, t.CC, t.Done,
					t.Attempts, t.Preemptions, toNanos(t.Started), toNanos(t.Finished), t.Wait, t.Trans,
					t.Checksum, t.Throughput, t.Error)
			}
			var rows *sql.Rows
			var err error
			if len(chunk) == taskUpdateBatch {
				if full == nil {
					if full, err = tx.PrepareContext(ctx, taskUpdateSQL(taskUpdateBatch, numbered)); err != nil {
						return err
					}
					defer full.Close()
				}
				rows, err = full.QueryContext(ctx, args...)
			} else {
				rows, err = tx.QueryContext(ctx, taskUpdateSQL(len(chunk), numbered), args...)
			}
			if err != nil {
				return err
			}
			if err := scanIDs(rows, updated); err != nil {
				return err
			}
			if len(updated) < len(chunk) {
				for i := range chunk {
					if !updated[chunk[i].ID] {
						return fmt.Errorf("task %d: %w", chunk[i].ID, ErrNotFound)
					}
				}
			}
		}
		return s.insertAudit(ctx, tx, audit)
	})
	if err != nil {
		return fmt.Errorf("store: update %d tasks: %w", len(tasks), err)
	}
	return nil
}

// scanIDs reads the IDs an UPDATE ... RETURNING id returned into ids
// (cleared first) and closes rows.
func scanIDs(rows *sql.Rows, ids map[int64]bool) error {
	defer rows.Close()
	clear(ids)
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return err
		}
		ids[id] = true
	}
	return rows.Err()
}

// lastPerID returns tasks without the entries for a task ID that a later
// entry overrides (tasks itself if there are none).
func lastPerID(tasks []Task) []Task {
	last := make(map[int64]int, len(tasks))
	for i := range tasks {
		last[tasks[i].ID] = i
	}
	if len(last) == len(tasks) {
		return tasks
	}
	out := make([]Task, 0, len(last))
	for i := range tasks {
		if last[tasks[i].ID] == i {
			out = append(out, tasks[i])
		}
	}
	return out
}

// FinishJob sets the job's terminal state. The job must be active: if it
// is terminal already, FinishJob is a no-op when the state is the same
// (a retried call) and fails with ErrConflict otherwise (for example a
// scheduler finishing a job the user has just canceled).
func (s *sqlStore) FinishJob(ctx context.Context, id int64, state string, at time.Time, actor string) error {
	if !Terminal(state) {
		return fmt.Errorf("store: finish job %d: %q is not a terminal state", id, state)
	}
	err := s.inTx(ctx, func(tx *stx) error {
		prev, err := jobState(ctx, tx, id)
		if err != nil {
			return err
		}
		if Terminal(prev) {
			if prev == state {
				return nil
			}
			return fmt.Errorf("job is %s: %w", prev, ErrConflict)
		}
		if err := setJobState(ctx, tx, id, prev, state, at); err != nil {
			return err
		}
		return s.insertAudit(ctx, tx, []AuditEntry{{At: at, JobID: id, Actor: actor, From: prev, To: state}})
	})
	if err != nil {
		return fmt.Errorf("store: finish job %d as %s: %w", id, state, err)
	}
	return nil
}

// CancelJob cancels the job and its non-terminal tasks in one transaction
// with one job-level audit entry ("N tasks canceled"), which keeps
// canceling a 100,000-task job cheap.
func (s *sqlStore) CancelJob(ctx context.Context, id int64, at time.Time, actor string) ([]int64, error) {
	var ids []int64
	err := s.inTx(ctx, func(tx *stx) error {
		prev, err := jobState(ctx, tx, id)
		if err != nil {
			return err
		}
		if Terminal(prev) {
			return nil
		}
		if err := setJobState(ctx, tx, id, prev, StateCanceled, at); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `UPDATE tasks SET state = $2, finished = $3
			WHERE job_id = $1 AND state NOT IN `+terminalSQL+` RETURNING id`,
			id, StateCanceled, toNanos(at))
		if err != nil {
			return fmt.Errorf("cancel tasks: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var tid int64
			if err := rows.Scan(&tid); err != nil {
				return fmt.Errorf("cancel tasks: %w", err)
			}
			ids = append(ids, tid)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("cancel tasks: %w", err)
		}
		rows.Close()
		slices.Sort(ids) // RETURNING order is unspecified
		return s.insertAudit(ctx, tx, []AuditEntry{{At: at, JobID: id, Actor: actor, From: prev,
			To: StateCanceled, Detail: fmt.Sprintf("%d tasks canceled", len(ids))}})
	})
	if err != nil {
		return nil, fmt.Errorf("store: cancel job %d: %w", id, err)
	}
	return ids, nil
}

// DoneAfterCancel moves task id from canceled to done, with the checksum
// found and an audit entry. The job keeps its state (canceled); its done
// count, computed from the tasks, rises by one.
func (s *sqlStore) DoneAfterCancel(ctx context.Context, id int64, checksum string, at time.Time, actor string) (bool, error) {
	var moved bool
	err := s.inTx(ctx, func(tx *stx) error {
		var jobID int64
		err := tx.QueryRowContext(ctx, `UPDATE tasks SET state = $2, done = size, checksum = $3, error = ''
			WHERE id = $1 AND state = $4 RETURNING job_id`, id, StateDone, checksum, StateCanceled).Scan(&jobID)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		moved = true
		return s.insertAudit(ctx, tx, []AuditEntry{{At: at, JobID: jobID, TaskID: id, Actor: actor, From: StateCanceled,
			To: StateDone, Detail: "found in place and verified after the cancel (" + checksum + ")"}})
	})
	if err != nil {
		return false, fmt.Errorf("store: task %d done after cancel: %w", id, err)
	}
	return moved, nil
}

// outOfRangeSQL selects the tasks still to end whose size or done is out
// of range (FailOutOfRange), through the tasks_active partial index.
var outOfRangeSQL = `SELECT ` + taskCols + ` FROM tasks WHERE state NOT IN ` + terminalSQL + `
	AND (size < -1 OR size > ` + strconv.FormatInt(MaxSize, 10) + ` OR done < 0 OR done > ` + strconv.FormatInt(MaxSize, 10) + `)
	ORDER BY id`

// OutOfRange says why a task's size or done is out of range, or "".
func OutOfRange(size, done int64) string {
	switch {
	case size < -1 || size > MaxSize:
		return fmt.Sprintf("size %d is out of range: a file has 0 to %d bytes (-1: not known yet)", size, int64(MaxSize))
	case done < 0 || done > MaxSize:
		return fmt.Sprintf("bytes done %d is out of range: 0 to %d", done, int64(MaxSize))
	}
	return ""
}

// FailOutOfRange implements Store.
func (s *sqlStore) FailOutOfRange(ctx context.Context, at time.Time, actor string) ([]Task, error) {
	bad, err := s.queryTasks(ctx, "tasks out of range", outOfRangeSQL)
	if err != nil || len(bad) == 0 {
		return nil, err
	}
	err = s.inTx(ctx, func(tx *stx) error {
		var audit []AuditEntry
		for _, t := range bad {
			why := "stored row refused: " + OutOfRange(t.Size, t.Done)
			res, err := tx.ExecContext(ctx, `UPDATE tasks SET state = $2, finished = $3, error = $4
				WHERE id = $1 AND state NOT IN `+terminalSQL, t.ID, StateFailed, toNanos(at), why)
			if err != nil {
				return fmt.Errorf("task %d: %w", t.ID, err)
			}
			if n, err := res.RowsAffected(); err != nil || n == 0 {
				continue // ended meanwhile
			}
			audit = append(audit, AuditEntry{At: at, JobID: t.JobID, TaskID: t.ID, Actor: actor,
				From: t.State, To: StateFailed, Detail: why, Term: t.Term})
		}
		return s.insertAudit(ctx, tx, audit)
	})
	if err != nil {
		return nil, fmt.Errorf("store: failing tasks out of range: %w", err)
	}
	return bad, nil
}

// jobState reads a job's state inside a write transaction.
func jobState(ctx context.Context, tx *stx, id int64) (string, error) {
	var state string
	err := tx.QueryRowContext(ctx, `SELECT state FROM jobs WHERE id = $1`, id).Scan(&state)
	if errors.Is(err, sql.ErrNoRows) {
		return "", ErrNotFound
	}
	return state, err
}

// setJobState moves a job from state prev to state to. The prev condition
// makes a concurrent change between jobState and here (possible on
// PostgreSQL, whose transactions here are READ COMMITTED) an ErrConflict
// rather than a lost update.
func setJobState(ctx context.Context, tx *stx, id int64, prev, to string, at time.Time) error {
	res, err := tx.ExecContext(ctx, `UPDATE jobs SET state = $3, finished = $4 WHERE id = $1 AND state = $2`,
		id, prev, to, toNanos(at))
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("job changed concurrently: %w", ErrConflict)
	}
	return nil
}

// --- audit ---

// insertAudit appends entries (a zero At is now) in tx, auditBatch rows
// per INSERT.
func (s *sqlStore) insertAudit(ctx context.Context, tx *stx, entries []AuditEntry) error {
	numbered := s.dialect == dialectPostgres
	now := time.Now()
	args := make([]any, 0, min(len(entries), auditBatch)*8)
	for start := 0; start < len(entries); start += auditBatch {
		chunk := entries[start:min(start+auditBatch, len(entries))]
		args = args[:0]
		for _, e := range chunk {
			if e.At.IsZero() {
				e.At = now
			}
			args = append(args, toNanos(e.At), e.JobID, e.TaskID, e.Actor, e.From, e.To, e.Detail, e.Term)
		}
		var b strings.Builder
		b.WriteString(`INSERT INTO audit (at, job_id, task_id, actor, from_state, to_state, detail, term) VALUES `)
		writeValues(&b, len(chunk), 8, numbered, nil)
		if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
			return fmt.Errorf("audit: %w", err)
		}
	}
	return nil
}

// Audit returns the job's entries in the order they were appended.
func (s *sqlStore) Audit(ctx context.Context, jobID int64) ([]AuditEntry, error) {
	return s.AuditPage(ctx, jobID, 0, 0)
}

// AuditPage implements Store.
func (s *sqlStore) AuditPage(ctx context.Context, jobID int64, from, limit int) ([]AuditEntry, error) {
	q := `SELECT at, job_id, task_id, actor, from_state, to_state, detail, term
		FROM audit WHERE job_id = $1 ORDER BY id`
	args := []any{jobID}
	switch {
	case limit > 0:
		q += ` LIMIT $2 OFFSET $3`
		args = append(args, limit, max(from, 0))
	case from > 0:
		q += ` OFFSET $2` // PostgreSQL's form; SQLite takes it after a LIMIT only
		if s.dialect != dialectPostgres {
			q = strings.Replace(q, ` OFFSET $2`, ` LIMIT -1 OFFSET $2`, 1)
		}
		args = append(args, from)
	}
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: audit of job %d: %w", jobID, err)
	}
	defer rows.Close()
	var out []AuditEntry
	for rows.Next() {
		var e AuditEntry
		var at int64
		if err := rows.Scan(&at, &e.JobID, &e.TaskID, &e.Actor, &e.From, &e.To, &e.Detail, &e.Term); err != nil {
			return nil, fmt.Errorf("store: audit of job %d: %w", jobID, err)
		}
		e.At = fromNanos(at)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: audit of job %d: %w", jobID, err)
	}
	return out, nil
}
