package wire

import "time"

// HistoryOut is the service's recent history, for charts: the servers'
// samples of what they scheduled, summed into buckets of step_seconds.
type HistoryOut struct {
	From        time.Time         `json:"from" doc:"Start of the first bucket (the range asked for, widened to whole buckets)."`
	To          time.Time         `json:"to" doc:"End of the last bucket."`
	Step        float64           `json:"step_seconds" doc:"Width of each bucket."`
	SampleEvery float64           `json:"sample_seconds" doc:"How often a server samples what it schedules."`
	Times       []int64           `json:"times" doc:"Each bucket's start, in unix seconds; the series' values are per bucket, in this order."`
	Servers     []string          `json:"servers" doc:"The servers whose samples were summed (with several servers, each samples the partitions it schedules)."`
	Total       HistorySeries     `json:"total" doc:"Every link's sum."`
	Endpoints   []HistoryEndpoint `json:"endpoints" doc:"Per endpoint: the links that read from it or write to it, by name."`
	Links       []HistoryLink     `json:"links" doc:"Per link (source and destination endpoint) that carried or held files in the range, by source and destination."`
}

// HistorySeries is one chart's values, one per bucket of HistoryOut.Times;
// null where no server was sampling (unknown, not idle).
type HistorySeries struct {
	Throughput []*float64 `json:"throughput" doc:"Bytes/s moved: the bucket's bytes over the time its samples cover."`
	Queued     []*float64 `json:"queued" doc:"Files waiting (queued, or being stat'ed), averaged over the bucket's samples."`
	Running    []*float64 `json:"running" doc:"Files running, averaged over the bucket's samples."`
	Done       []*float64 `json:"done" doc:"Files that ended done in the bucket."`
	Failed     []*float64 `json:"failed" doc:"Files that ended failed in the bucket."`
	Bytes      int64      `json:"bytes" doc:"Bytes moved in the whole range."`
	FilesDone  int64      `json:"files_done" doc:"Files done in the whole range."`
	Failures   int64      `json:"files_failed" doc:"Files failed in the whole range."`
}

// HistoryEndpoint is one endpoint's history.
type HistoryEndpoint struct {
	Name string `json:"name"`
	HistorySeries
}

// HistoryLink is one link's history.
type HistoryLink struct {
	Source      string `json:"source" doc:"Source endpoint."`
	Destination string `json:"destination" doc:"Destination endpoint."`
	HistorySeries
}

// FailureOut is a failed file, for the list of recent failures.
type FailureOut struct {
	ID          int64     `json:"id" doc:"The file's task id: before_id, to page on from this entry."`
	Job         int64     `json:"job"`
	Index       int       `json:"index" doc:"The file's position in its job (GET /v1/jobs/{job}/files?from=index&limit=1)."`
	Label       string    `json:"label,omitempty" doc:"The job's label."`
	Owner       string    `json:"owner"`
	VO          string    `json:"vo"`
	Source      string    `json:"source"`
	Destination string    `json:"destination"`
	SrcEndpoint string    `json:"source_endpoint"`
	DstEndpoint string    `json:"destination_endpoint"`
	Size        int64     `json:"size" doc:"Bytes (-1: never learnt)."`
	Attempts    int       `json:"attempts"`
	Finished    time.Time `json:"finished" doc:"When it failed."`
	Error       string    `json:"error" doc:"Why it failed."`
}
