package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/sluice-dtn/sluice/server"
	"github.com/sluice-dtn/sluice/wire"
)

// An FTS3 submission (POST /fts3/jobs) is turned into Sluice's FTS3 job
// form (wire.JobIn with params) and then goes the way of one posted to
// /v1/jobs: the same schema, conversion, refusals and warnings. What
// only FTS3's whole job has is settled here first: its top-level fields
// other than files and params, its file fields Sluice's form lacks, a
// checksum that names only an algorithm, and the values FTS3's client
// sends for "the server's default" (retry -1 or 0, nulls).

// fts3FileRefused are FTS3 file fields Sluice cannot honour and will not
// ignore, with why.
var fts3FileRefused = map[string]string{
	"staging_metadata": "staging files from tape is not supported",
}

// fts3FileWarned are FTS3 file fields Sluice accepts and does not use
// (beyond those of wire.FileIn), with what that means.
var fts3FileWarned = map[string]string{
	"scitag":             "transfers are not tagged",
	"archive_metadata":   "not kept",
	"source_tokens":      "Sluice reads storage with its own credentials (an agent's, or a storage endpoint's)",
	"destination_tokens": "Sluice writes storage with its own credentials (an agent's, or a storage endpoint's)",
}

// fts3ParamsHere are FTS3 parameters settled here, before the params go
// to fts3Params (fts3.go): refused with why, or (warn) accepted and not
// used.
var fts3ParamsHere = map[string]struct {
	why  string
	warn bool
}{
	"destination_spacetoken":      {"sluice agents have no space tokens", true},
	"overwrite_when_only_on_disk": {"Sluice does not know whether a destination is on tape; use overwrite", false},
}

// fts3Algorithms are the checksum algorithms Sluice verifies with (the
// job's checksum_algorithm).
var fts3Algorithms = []string{"adler32", "md5", "sha256", "crc32c"}

// submit answers POST /jobs: {"job_id": ID}, with Sluice's warnings.
func (f *fts3Handler) submit(w http.ResponseWriter, r *http.Request, c server.Caller) {
	// The caller is authenticated before the body is read (serve), and
	// the body's read is bounded in size and time, as /v1/jobs's is.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(jobBodyReadTimeout))
	body, err := io.ReadAll(io.LimitReader(r.Body, maxJobBody+1))
	_ = rc.SetReadDeadline(time.Time{})
	switch {
	case err != nil:
		fts3Error(w, http.StatusBadRequest, "cannot read the request body: %v", err)
		return
	case len(body) > maxJobBody:
		fts3Error(w, http.StatusRequestEntityTooLarge, "the job is larger than %d bytes", maxJobBody)
		return
	}
	in, warnings, err := fts3Submission(body)
	if err != nil {
		fts3Error(w, http.StatusBadRequest, "%v", err)
		return
	}
	// Sluice's schema of a job, as /v1/jobs checks it.
	js, err := json.Marshal(in)
	if err != nil {
		fts3Error(w, http.StatusInternalServerError, "encoding the converted job: %v", err)
		return
	}
	if _, errs := f.jobs.check(js); len(errs) > 0 {
		msgs := make([]string, len(errs))
		for i, e := range errs {
			msgs[i] = e.Error()
			if d, ok := e.(*huma.ErrorDetail); ok {
				msgs[i] = fts3Location(d.Location) + ": " + d.Message
			}
		}
		fts3Error(w, http.StatusBadRequest, "validation failed: %s", strings.Join(msgs, "; "))
		return
	}
	spec, more, err := jobSpec(in)
	if err != nil {
		fts3Error(w, http.StatusBadRequest, "%v", err)
		return
	}
	j, _, err := f.s.Submit(r.Context(), c, spec)
	if err != nil {
		fts3Error(w, fts3Code(err), "%v", err)
		return
	}
	writeFTS3(w, http.StatusOK, wire.FTS3Submitted{JobID: strconv.FormatInt(j.ID, 10), Warnings: append(warnings, more...)})
}

// fts3Location names a field of the converted job by its FTS3 name.
func fts3Location(loc string) string {
	loc = strings.TrimPrefix(loc, "body.")
	for sluiceName, name := range map[string]string{".size": ".filesize", ".source": ".sources", ".destination": ".destinations"} {
		if strings.HasSuffix(loc, sluiceName) {
			return strings.TrimSuffix(loc, sluiceName) + name
		}
	}
	return loc
}

// fts3Submission converts an FTS3 job's JSON to Sluice's FTS3 form, with
// the warnings of what it accepts without honouring.
func fts3Submission(body []byte) (JobIn, []string, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return JobIn{}, nil, fmt.Errorf("the job is not a JSON object: %w", err)
	}
	var warnings []string
	in := JobIn{}
	names := make([]string, 0, len(top))
	for k := range top {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		raw := top[k]
		switch k {
		case "files", "params":
		case "delete":
			if !isOff(k, raw) {
				return in, nil, fmt.Errorf("delete: deletion jobs are not supported; Sluice only copies files")
			}
		case "staging":
			if !isOff(k, raw) {
				return in, nil, fmt.Errorf("staging: staging jobs (bring online) are not supported")
			}
		default:
			if !isOff(k, raw) {
				warnings = append(warnings, fmt.Sprintf("%s ignored: not a field of an FTS3 job that Sluice knows", k))
			}
		}
	}
	files, fileWarn, err := fts3Files(top["files"])
	if err != nil {
		return in, nil, err
	}
	in.Files = files
	warnings = append(warnings, fileWarn...)
	// A checksum that names only an algorithm ("ADLER32", the client's
	// default) asks FTS3 to compare the source's and the destination's
	// checksums by it: the job's algorithm.
	var algos []string
	for i := range in.Files {
		c := strings.TrimSpace(in.Files[i].Checksum)
		if c == "" || strings.Contains(c, ":") {
			continue
		}
		a := strings.ToLower(c)
		if !slices.Contains(fts3Algorithms, a) {
			return in, nil, fmt.Errorf("files[%d].checksum %q: Sluice verifies with %s", i, c, strings.Join(fts3Algorithms, ", "))
		}
		if !slices.Contains(algos, a) {
			algos = append(algos, a)
		}
		in.Files[i].Checksum = ""
	}
	for _, f := range in.Files {
		if a, _, ok := strings.Cut(f.Checksum, ":"); ok && !slices.Contains(algos, strings.ToLower(a)) {
			algos = append(algos, strings.ToLower(a))
		}
	}
	switch {
	case len(algos) > 1:
		return in, nil, fmt.Errorf("the files' checksums use %s: a Sluice job verifies with one algorithm; submit one job per algorithm", strings.Join(algos, " and "))
	case len(algos) == 1:
		in.Checksum = algos[0]
	}
	params, paramWarn, err := fts3JobParams(top["params"])
	if err != nil {
		return in, nil, err
	}
	in.Params = params
	return in, append(warnings, paramWarn...), nil
}

// fts3Files converts the files of an FTS3 job, one at a time.
func fts3Files(raw json.RawMessage) ([]FileIn, []string, error) {
	if len(raw) == 0 || isOff("files", raw) {
		return nil, nil, errors.New("files: a job needs at least one file (deletion and staging jobs are not supported)")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return nil, nil, errors.New("files: want a list of files")
	}
	var files []FileIn
	warned := map[string]int{}
	strategies := 0
	for i := 0; dec.More(); i++ {
		var m map[string]json.RawMessage
		if err := dec.Decode(&m); err != nil {
			return nil, nil, fmt.Errorf("files[%d]: %w", i, err)
		}
		var f FileIn
		for k, v := range m {
			var err error
			switch k {
			case "sources":
				err = json.Unmarshal(v, &f.Sources)
			case "destinations":
				err = json.Unmarshal(v, &f.Destinations)
			case "filesize":
				// FTS3 takes 0 for "not given"; a negative size is
				// left for the schema to refuse.
				if string(v) != "null" && string(v) != "0" {
					err = json.Unmarshal(v, &f.Filesize)
				}
			case "checksum":
				if string(v) != "null" {
					err = json.Unmarshal(v, &f.Checksum)
				}
			case "metadata":
				if !isOff(k, v) {
					err = json.Unmarshal(v, &f.Metadata)
				}
			case "activity":
				// FTS3's default activity asks for nothing.
				var a string
				if err = json.Unmarshal(v, &a); err == nil && a != "default" {
					f.Activity = a
				}
			case "selection_strategy":
				// Chooses among a file's sources: Sluice reads from
				// all of them at once (the job's selection). With one
				// source, or "auto" (FTS3's default), there is no
				// choice to make.
				var s string
				if json.Unmarshal(v, &s) != nil || (s != "" && s != "auto") {
					strategies++
				}
			default:
				if isOff(k, v) {
					continue
				}
				if why, ok := fts3FileRefused[k]; ok {
					return nil, nil, fmt.Errorf("files[%d].%s: %s", i, k, why)
				}
				warned[k]++
			}
			if err != nil {
				return nil, nil, fmt.Errorf("files[%d].%s: %w", i, k, err)
			}
		}
		files = append(files, f)
	}
	if _, err := dec.Token(); err != nil {
		return nil, nil, fmt.Errorf("files: %w", err)
	}
	var warnings []string
	if strategies > 0 {
		warnings = append(warnings, fmt.Sprintf("files[].selection_strategy ignored (%d files): Sluice reads a file from all its sources at once (see the job's selection)", strategies))
	}
	keys := make([]string, 0, len(warned))
	for k := range warned {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		why, ok := fts3FileWarned[k]
		if !ok {
			why = "not a field of an FTS3 file that Sluice knows"
		}
		warnings = append(warnings, fmt.Sprintf("files[].%s ignored (%d files): %s", k, warned[k], why))
	}
	return files, warnings, nil
}

// fts3JobParams converts an FTS3 job's params: nulls and FTS3's "server
// default" values dropped (Sluice's defaults answer for them), retry
// below 0 ("no retries") made 0, and the parameters settled here taken
// out; the rest goes to fts3Params through wire.ParamsIn.
func fts3JobParams(raw json.RawMessage) (*ParamsIn, []string, error) {
	p := map[string]json.RawMessage{}
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, nil, fmt.Errorf("params: %w", err)
		}
	}
	var warnings []string
	for k, v := range p {
		if string(v) == "null" {
			delete(p, k)
			continue
		}
		if here, ok := fts3ParamsHere[k]; ok {
			delete(p, k)
			if isOff(k, v) {
				continue
			}
			if !here.warn {
				return nil, nil, fmt.Errorf("FTS3 parameters Sluice cannot honour: params.%s %s: %s", k, v, here.why)
			}
			warnings = append(warnings, fmt.Sprintf("params.%s %s ignored: %s", k, v, here.why))
		}
	}
	if v, ok := p["retry"]; ok {
		n, err := strconv.ParseFloat(string(v), 64)
		switch {
		case err != nil:
			return nil, nil, fmt.Errorf("params.retry %s: want a number", v)
		case n < 0:
			p["retry"] = json.RawMessage("0") // FTS3: no retries
		case n == 0:
			delete(p, "retry") // FTS3: the server's default
		}
	}
	b, err := json.Marshal(p)
	if err != nil {
		return nil, nil, fmt.Errorf("params: %w", err)
	}
	var out ParamsIn
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, nil, fmt.Errorf("params: %w", err)
	}
	slices.Sort(warnings)
	return &out, warnings, nil
}
