package wire

// The documents of FTS3's REST API as Sluice serves it under /fts3 (see
// package api, fts3rest.go): the shapes FTS3's own server (fts-rest)
// answers with, so that FTS3's Python client (fts3.rest.client.easy) and
// tools built on its API read Sluice's answers as they read FTS3's.
// Names and types follow FTS3's database columns, which fts-rest writes
// out as they are; times are UTC, written as FTS3 writes them
// (2006-01-02T15:04:05, no zone).

// FTS3TimeFormat is how FTS3's REST API writes times (Go layout).
const FTS3TimeFormat = "2006-01-02T15:04:05"

// FTS3Version is a version as FTS3's API root reports it.
type FTS3Version struct {
	Major int `json:"major"`
	Minor int `json:"minor"`
	Patch int `json:"patch"`
}

// FTS3Root answers GET /fts3/, which FTS3's client reads when it opens a
// Context (it logs the api version, and fails if there is none).
type FTS3Root struct {
	// API is the version of FTS3's REST API whose calls Sluice answers.
	API FTS3Version `json:"api"`
	// Core and Schema are null: there is no FTS3 server or database.
	Core   *FTS3Version `json:"core"`
	Schema *FTS3Version `json:"schema"`
	// Implementation says which server answers: Sluice, at its version.
	Implementation string `json:"implementation"`
}

// FTS3Whoami answers GET /fts3/whoami: the caller as FTS3 describes a
// user authenticated by a token (method oauth2).
type FTS3Whoami struct {
	UserDN       string            `json:"user_dn"` // the Sluice user's name: Sluice has no certificates
	DN           []string          `json:"dn"`
	BaseID       string            `json:"base_id"`
	VOMSCred     []string          `json:"voms_cred"`
	VOs          []string          `json:"vos"` // the user's VO
	VOsID        []string          `json:"vos_id"`
	Roles        []string          `json:"roles"`
	Level        map[string]string `json:"level"` // transfer: personal (own jobs) or all (admins)
	DelegationID string            `json:"delegation_id"`
	Method       string            `json:"method"`
	IsRoot       bool              `json:"is_root"` // a Sluice admin
}

// FTS3Submitted answers POST /fts3/jobs.
type FTS3Submitted struct {
	JobID string `json:"job_id"`
	// Warnings, Sluice's addition (FTS3's clients read job_id only):
	// the fields of the submission Sluice accepted without honouring
	// them, each with what that means.
	Warnings []string `json:"warnings,omitempty"`
}

// FTS3Job is a job as GET /fts3/jobs/ID shows it.
type FTS3Job struct {
	JobID    string `json:"job_id"`
	JobState string `json:"job_state"`
	JobType  string `json:"job_type"` // N: a plain transfer job (no multihop, no reuse)
	// SourceSE and DestSE are the storage (scheme://endpoint) of the
	// job's files when they all share one, and null otherwise.
	SourceSE       *string `json:"source_se"`
	DestSE         *string `json:"dest_se"`
	UserDN         string  `json:"user_dn"`
	VOName         string  `json:"vo_name"`
	CredID         string  `json:"cred_id"`
	Reason         string  `json:"reason"`
	SubmitTime     string  `json:"submit_time"`
	JobFinished    *string `json:"job_finished"`
	Priority       int     `json:"priority"`
	VerifyChecksum string  `json:"verify_checksum"` // b (both ends) or n (none)
	OverwriteFlag  string  `json:"overwrite_flag"`  // Y or N
	Retry          int     `json:"retry"`
	CancelJob      bool    `json:"cancel_job"`
	JobMetadata    any     `json:"job_metadata"` // as submitted (params.job_metadata), or null
	HTTPStatus     string  `json:"http_status"`
	HTTPMessage    *string `json:"http_message,omitempty"`
	// Files, with ?files=FIELD,...: each file's fields named there.
	Files []map[string]any `json:"files,omitempty"`
}

// FTS3File is a job's file as GET /fts3/jobs/ID/files shows it.
type FTS3File struct {
	FileID    int64  `json:"file_id"`
	FileIndex int    `json:"file_index"`
	JobID     string `json:"job_id"`
	FileState string `json:"file_state"`
	VOName    string `json:"vo_name"`
	SourceSE  string `json:"source_se"`
	DestSE    string `json:"dest_se"`
	// SourceSURL and DestSURL are the file's URLs as submitted.
	SourceSURL string `json:"source_surl"`
	DestSURL   string `json:"dest_surl"`
	Reason     string `json:"reason"`
	// Filesize is null until the source is stat'ed; UserFilesize is
	// the size submitted, if one was (or the stat'ed size).
	Filesize     *int64  `json:"filesize"`
	UserFilesize *int64  `json:"user_filesize"`
	Checksum     *string `json:"checksum"` // algo:hex, verified or expected
	StartTime    *string `json:"start_time"`
	FinishTime   *string `json:"finish_time"`
	TxDuration   float64 `json:"tx_duration"` // seconds moving bytes
	// Throughput is the final run's average in MB/s of 2^20 bytes, the
	// unit FTS3 stores.
	Throughput   float64 `json:"throughput"`
	Retry        int     `json:"retry"`         // transient failures so far
	FileMetadata any     `json:"file_metadata"` // as submitted (files[].metadata), or null
}

// FTS3Error is an error as FTS3's API answers it; its client shows
// message.
type FTS3Error struct {
	Status  string `json:"status"` // "404 Not Found"
	Message string `json:"message"`
}
