package wire

import (
	"encoding/json"
	"time"
)

// SubmitOut answers a submission: the job, and what of the submission
// Sluice accepted without honouring it.
type SubmitOut struct {
	JobOut
	Warnings []string `json:"warnings,omitempty" doc:"Fields of the submission accepted but not honoured (FTS3 parameters and file fields Sluice does not use), each with what that means; none when every field is honoured. Fields Sluice cannot honour and will not ignore (params.bring_online, params.multihop, ...) are refused with 422 instead."`
}

// JobOut is a job's status.
type JobOut struct {
	ID             int64           `json:"id"`
	Metadata       json.RawMessage `json:"metadata,omitempty" doc:"What the submitter attached to the job (FTS3's params.job_metadata), as sent."`
	Owner          string          `json:"owner"`
	VO             string          `json:"vo"`
	Label          string          `json:"label,omitempty"`
	Class          string          `json:"class"`
	Priority       int             `json:"priority,omitempty"`
	State          string          `json:"state" enum:"active,done,failed,canceled"`
	SubmissionID   string          `json:"submission_id,omitempty"`
	Created        time.Time       `json:"created"`
	Finished       *time.Time      `json:"finished,omitempty"`
	Deadline       *time.Time      `json:"deadline,omitempty"`
	VerifyChecksum bool            `json:"verify_checksum"`
	Checksum       string          `json:"checksum_algorithm"`
	Optimization   bool            `json:"optimization,omitempty"`
	Streams        int             `json:"streams,omitempty"`
	Adaptive       bool            `json:"adaptive,omitempty"`
	Selection      string          `json:"selection,omitempty"`
	Overwrite      bool            `json:"overwrite" doc:"Files at their destinations are replaced."`
	IfExists       string          `json:"if_exists" enum:"skip_identical,fail,replace,sync" doc:"What the job does with a file already at its destination: skip_identical (Sluice's default: one identical to the source is done without copying, any other fails), fail (FTS3's overwrite false), replace, or sync (sync_level says by which test a file there is kept; any other is replaced)."`
	PreserveMtime  bool            `json:"preserve_mtime,omitempty" doc:"Each file gets its source's modification time."`
	Listing        bool            `json:"listing,omitempty" doc:"A directory of the job is still being listed: more files may come (files counts those found so far)."`
	ListingError   string          `json:"listing_error,omitempty" doc:"Why the listing of a directory of the job stopped before its end (the job fails)."`
	SyncLevel      string          `json:"sync_level,omitempty" enum:"exists,size,mtime,checksum," doc:"The job's sync level, if it has one (see the submission's sync_level)."`
	Files          int             `json:"files"`
	FilesDone      int             `json:"files_done"`
	FilesInPlace   int             `json:"files_in_place,omitempty" doc:"Of files_done, those found already at their destinations (same size and checksum) and not copied."`
	FilesFailed    int             `json:"files_failed"`
	FilesCanceled  int             `json:"files_canceled"`
	Bytes          int64           `json:"bytes"`
	BytesDone      int64           `json:"bytes_done"`
	Throughput     float64         `json:"throughput" doc:"Bytes per second now."`
	ETA            float64         `json:"eta_seconds,omitempty" doc:"Estimated seconds to completion at the current throughput."`
}

// FileOut is one file's status.
type FileOut struct {
	Index       int             `json:"index"`
	Metadata    json.RawMessage `json:"metadata,omitempty" doc:"What the submitter attached to the file, as sent."`
	Source      string          `json:"source"`
	Destination string          `json:"destination"`
	Size        int64           `json:"size" doc:"-1 while not yet stat'ed."`
	State       string          `json:"state" enum:"resolving,queued,running,done,failed,canceled"`
	CC          int             `json:"cc,omitempty" doc:"Concurrency of the current or last run."`
	BytesDone   int64           `json:"bytes_done"`
	Attempts    int             `json:"attempts,omitempty"`
	Preemptions int             `json:"preemptions,omitempty"`
	Checksum    string          `json:"checksum,omitempty" doc:"Verified checksum, ALGO:HEX."`
	Expected    string          `json:"expected_checksum,omitempty"`
	Throughput  float64         `json:"throughput,omitempty" doc:"Average bytes per second of the final run."`
	Wait        float64         `json:"wait_seconds"`
	Transfer    float64         `json:"transfer_seconds"`
	Slowdown    float64         `json:"slowdown,omitempty" doc:"Turnaround over transfer time, for finished files."`
	Started     *time.Time      `json:"started,omitempty"`
	Finished    *time.Time      `json:"finished,omitempty"`
	Error       string          `json:"error,omitempty"`
	Note        string          `json:"note,omitempty" doc:"How a done file ended, when not by a copy: \"already in place\" (found at its destination, identical to the source, and not copied)."`
}

// AuditOut is one state change.
type AuditOut struct {
	At     time.Time `json:"at"`
	Task   int64     `json:"task,omitempty"`
	Actor  string    `json:"actor"`
	From   string    `json:"from,omitempty"`
	To     string    `json:"to"`
	Detail string    `json:"detail,omitempty"`
	Term   int64     `json:"term,omitempty" doc:"Lease term of the file's partition under which the scheduler made the change (several servers: per partition, terms never go down)."`
}
