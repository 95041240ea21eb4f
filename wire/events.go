package wire

import "time"

// Event is one change the API streams to clients (GET /v1/events).
type Event struct {
	Type   string    `json:"type"` // job, task, progress; keepalive (first, once subscribed, then every 15 s); error
	At     time.Time `json:"at"`
	Job    int64     `json:"job"`
	Owner  int64     `json:"-"`
	Task   int64     `json:"task,omitempty"`
	State  string    `json:"state,omitempty"`
	Detail string    `json:"detail,omitempty"`
	// Progress events.
	FilesDone  int     `json:"files_done,omitempty"`
	Files      int     `json:"files,omitempty"`
	BytesDone  int64   `json:"bytes_done,omitempty"`
	Bytes      int64   `json:"bytes,omitempty"`
	Throughput float64 `json:"throughput,omitempty"`
}
