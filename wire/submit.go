package wire

import (
	"encoding/json"
	"time"
)

// FileIn is one file of a submission. Sluice's own fields are source,
// destination and size; FTS3 clients send sources, destinations and
// filesize instead.
type FileIn struct {
	Source       string   `json:"source,omitempty" doc:"sluice://ENDPOINT/path of the file to copy."`
	Destination  string   `json:"destination,omitempty" doc:"sluice://ENDPOINT/path to write."`
	Sources      []string `json:"sources,omitempty" maxItems:"16" doc:"FTS3 form of source; several are replicas of one file on different endpoints, downloaded from all at once (see the job's selection)."`
	Destinations []string `json:"destinations,omitempty" maxItems:"1" doc:"FTS3 form of destination."`
	Size         *int64   `json:"size,omitempty" minimum:"0" maximum:"1152921504606846976" doc:"Size in bytes, at most 2^60 (1 EiB; a job's sizes add up to at most that too); stat'ed at the source if absent."`
	Filesize     *int64   `json:"filesize,omitempty" minimum:"0" maximum:"1152921504606846976" doc:"FTS3 form of size."`
	Checksum     string   `json:"checksum,omitempty" maxLength:"200" doc:"Expected checksum, ALGO:HEX (e.g. adler32:0a1b2c3d)."`
	Metadata     any      `json:"metadata,omitempty" doc:"Anything the submitter attaches to the file (FTS3's file metadata, which Rucio finds its requests by): kept and given back with the file as sent, at most 4096 bytes of JSON."`
	Activity     string   `json:"activity,omitempty" maxLength:"200" doc:"FTS3 activity: not used for scheduling (priority and class are); a submission with one is answered with a warning."`
	Recursive    bool     `json:"recursive,omitempty" doc:"The source is a directory, copied whole into the destination directory as cp -r copies it (its contents land in the destination): the service lists it a page at a time and its files start while it lists; directories are made, empty ones too; entries that cannot be copied (broken links, devices) fail, each saying why. A job may hold several directories and files, none reading or writing inside what another writes."`
}

// ParamsIn is FTS3's "params" object. FTS3 has many more parameters than
// Sluice uses; the others are accepted, so that FTS3 tools can submit
// unchanged, but never silently: one that asks for something Sluice does
// not do (staging from tape, multihop, ...) is refused, and any other set
// to something other than its "off" value is named in the answer's
// warnings (see fts3Params in package api).
type ParamsIn struct {
	_              struct{} `additionalProperties:"true"`
	VerifyChecksum any      `json:"verify_checksum,omitempty" doc:"true/false, or FTS3's both/source/target/none."`
	Priority       *int     `json:"priority,omitempty" minimum:"1" maximum:"5"`
	Retry          *int     `json:"retry,omitempty" minimum:"0" maximum:"100"`
	NoStreams      *int     `json:"nostreams,omitempty" minimum:"0" maximum:"1024" doc:"FTS3 form of streams."`
	Overwrite      *bool    `json:"overwrite,omitempty" doc:"FTS3's overwrite: false (FTS3's default) fails each file whose destination exists (\"destination exists; overwrite is not enabled\"); true replaces it."`

	// others are the parameters Sluice does not use, as sent.
	others map[string]json.RawMessage
}

// Others returns the parameters Sluice does not use, as sent, by name
// (nil if there are none). The map is the ParamsIn's own.
func (p ParamsIn) Others() map[string]json.RawMessage { return p.others }

// UnmarshalJSON decodes the parameters Sluice uses and keeps the others
// aside (to refuse or warn about), also under a decoder that disallows
// unknown fields (`sluice submit -f` checks a job file's own fields that
// way): FTS3 job files carry parameters such as job_metadata.
func (p *ParamsIn) UnmarshalJSON(b []byte) error {
	type params ParamsIn // without this method
	if err := json.Unmarshal(b, (*params)(p)); err != nil {
		return err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	for _, k := range []string{"verify_checksum", "priority", "retry", "nostreams", "overwrite"} {
		delete(all, k)
	}
	if len(all) > 0 {
		p.others = all
	}
	return nil
}

// MarshalJSON writes the parameters Sluice uses and the others as they
// were read, so that a client that decoded a job file (sluice submit -f)
// passes them on, for the service to refuse or warn about.
func (p ParamsIn) MarshalJSON() ([]byte, error) {
	type params ParamsIn // without this method
	b, err := json.Marshal(params(p))
	if err != nil || len(p.others) == 0 {
		return b, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	for k, v := range p.others {
		if _, ok := m[k]; !ok {
			m[k] = v
		}
	}
	return json.Marshal(m)
}

// JobIn is a submission.
type JobIn struct {
	Files          []FileIn      `json:"files" minItems:"1" maxItems:"1000000"`
	Class          string        `json:"class,omitempty" enum:"interactive,batch" doc:"interactive (default) or batch (STEAL's background class)."`
	Priority       *int          `json:"priority,omitempty" minimum:"1" maximum:"5"`
	Label          string        `json:"label,omitempty" maxLength:"256"`
	Deadline       *time.Time    `json:"deadline,omitempty" doc:"When the job should be done by (RFC 3339, in the future). Recorded and returned with the job; the scheduler does not order by it: use priority."`
	VerifyChecksum *bool         `json:"verify_checksum,omitempty" doc:"Verify each file end to end (default true)."`
	Checksum       string        `json:"checksum_algorithm,omitempty" enum:"adler32,md5,sha256,crc32c,none" doc:"Algorithm used to verify (default adler32)."`
	Retry          *int          `json:"retry,omitempty" minimum:"0" maximum:"100" doc:"Transient failures tolerated per file (default 3)."`
	SubmissionID   string        `json:"submission_id,omitempty" maxLength:"256" doc:"Makes submission idempotent: the same id returns the first job."`
	Params         *ParamsIn     `json:"params,omitempty" doc:"FTS3 job parameters."`
	Streams        int           `json:"streams,omitempty" minimum:"0" maximum:"1024" doc:"Fix each file's concurrency (partial transfers at once); 0: the scheduler chooses."`
	Adaptive       bool          `json:"adaptive,omitempty" doc:"Run as an adaptive client of the Policy Service (Chervenak et al., Fig. 3): request streams per pair, keep min(c_i, streams/p) files in flight, adapt every d files."`
	AdaptiveParams *AdaptiveSpec `json:"adaptive_params,omitempty" doc:"The adaptive client's parameters (defaults: ci 4, cmax 8, delta 2, d 4, p 4, t 0.1); giving them makes the job adaptive. p above a pair's per-client limit is refused."`
	Selection      string        `json:"selection,omitempty" enum:"bos,eas,ms,ntss,tcs,tcs-minus,tcs-dynamic," doc:"How a file with several sources is split across them (Yang, Schopf, Foster): bos (best source only), eas (equal parts), ms, ntss, tcs (Tuned Conservative Scheduling, default), tcs-minus, tcs-dynamic (tcs with work stealing)."`
	Optimization   bool          `json:"optimization,omitempty" doc:"Estimate each endpoint pair's best concurrency first (from history when fresh, else by sampling the path) and run the files with it."`
	PreserveMtime  bool          `json:"preserve_mtime,omitempty" doc:"Give each file its source's modification time (Globus's preserve_timestamp), set before the file is put in place; where the destination cannot set one, the file's note says so."`
	SyncLevel      string        `json:"sync_level,omitempty" enum:"exists,size,mtime,checksum," doc:"Copy only the files whose destination is missing or differs from the source by this test, and replace those that differ (Globus's sync_level): exists (a file there is kept, whatever it holds), size (kept if of the same size), mtime (kept if of the same size and modified no earlier than the source), checksum (kept if of the same size and checksum, computed by the endpoints). A file kept is done without a byte moved (note \"already in place\"), so a job submitted again with a sync level moves only what changed. Not with overwrite false."`
	Overwrite      *bool         `json:"overwrite,omitempty" doc:"Replace files already at their destinations. Default false: nothing is replaced; a file already in place (same size and checksum as the source) is recorded done without being copied (note \"already in place\"), any other fails. An FTS3 job (one with params) follows FTS3's params.overwrite instead: false fails every file whose destination exists."`
}

// AdaptiveSpec are an adaptive job's client parameters (Table II of
// Chervenak et al., "Adaptation and Policy-Based Resource Allocation for
// Efficient Bulk Data Transfers in High Performance Computing
// Environments"); zero fields take the server's defaults (DefaultAdaptive
// in package server).
type AdaptiveSpec struct {
	Ci    int     `json:"ci,omitempty" doc:"Initial concurrency (files in flight)."`
	Cmax  int     `json:"cmax,omitempty" doc:"Largest concurrency."`
	Delta int     `json:"delta,omitempty" doc:"Concurrency step up or down."`
	D     int     `json:"d,omitempty" doc:"Files completed between adaptations."`
	P     int     `json:"p,omitempty" doc:"Parallel streams per file."`
	T     float64 `json:"t,omitempty" doc:"Rate change (fraction of the last rate) that triggers adaptation."`
}
