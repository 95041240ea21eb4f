package api_test

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/sluice-dtn/sluice/api/apitest"
)

// The fuzz targets post job submissions through the API's real path
// (huma's routing, the file-by-file body validation, the FTS3 and Sluice
// forms, the server's checks, the store) and hold every answer to
// apitest.CheckSubmit: a clear refusal, or a job with sane totals that
// lists back. Their seeds, which run under plain `go test`, are the
// inputs of an attack report: sizes that overflowed a job's sum, sizes
// below -1, odd and percent-encoded URLs, NUL, .., very long names, and
// a destination equal to the directory a user was granted.

// hugeName is one path element longer than file systems take.
var hugeName = strings.Repeat("n", 300)

// FuzzSubmitJSON posts any body.
func FuzzSubmitJSON(f *testing.F) {
	for _, s := range []string{
		`{"files":[{"source":"sluice://a1/home/alice/x","destination":"sluice://a2/home/alice/y","size":5}]}`,
		`{"files":[{"source":"sluice://a1/home/alice/x","destination":"sluice://a2/home/alice/y","size":9223372036854775807},{"source":"sluice://a1/home/alice/z","destination":"sluice://a2/home/alice/w","size":9223372036854775807}]}`,
		`{"files":[{"source":"sluice://a1/home/alice/x","destination":"sluice://a2/home/alice/y","size":-2}]}`,
		`{"files":[{"source":"sluice://a1/home/alice/x","destination":"sluice://a2/home/alice/y","size":-1}]}`,
		`{"files":[{"source":"sluice://a1/home/alice/x","destination":"sluice://a2/home/alice/y","size":1e300}]}`,
		`{"files":[{"source":"sluice://a1/home/alice/x","destination":"sluice://a2/home/alice/y","size":1.5}]}`,
		`{"files":[{"source":"sluice://a1/home/alice/x","destination":"sluice://a2/home/alice"}]}`,
		`{"files":[{"sources":["sluice://a1/home/alice/x","sluice://a2/home/alice/x"],"destinations":["sluice://a2/home/alice/y"],"filesize":1152921504606846976}],"params":{"verify_checksum":"both","nostreams":4,"retry":2,"overwrite":true,"job_metadata":{"k":"v"}}}`,
		`{"files":[{"sources":["sluice://a1/home/alice/x"],"destinations":["sluice://a2/home/alice/y"],"filesize":1152921504606846977}]}`,
		`{"files":[{"source":"sluice://a1/home/alice/x","destination":"sluice://a2/home/alice/y","size":3,"filesize":4}]}`,
		`{"files":[{"source":"sluice://a1/home/alice/%00","destination":"sluice://a2/home/alice/%2e%2e/bob/y"}]}`,
		`{"files":[{"source":"sluice://a1/home/alice/a\u0000b","destination":"sluice://a2/home/alice/y"}]}`,
		`{"files":[],"class":"batch"}`,
		`{"files":null}`,
		`[]`,
		`{"files":[{"source":"sluice://a1/home/alice/x","destination":"sluice://a2/home/alice/y"}],"submission_id":"s1","adaptive":true,"streams":4}`,
		`{"files":[{"source":"sluice://a1/home/alice/x","destination":"sluice://a2/home/alice/y"}],"deadline":"1970-01-01T00:00:00Z"}`,
		`{"files":[{"source":"sluice://a1/home/alice/x","destination":"sluice://a2/home/alice/` + hugeName + `"}]}`,
	} {
		f.Add([]byte(s))
	}
	svc := apitest.New(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		svc.CheckSubmit(t, body)
	})
}

// FuzzSubmitSizes posts two files of the given sizes, in Sluice's form
// (size) or FTS3's (filesize).
func FuzzSubmitSizes(f *testing.F) {
	const max = 1 << 60
	for _, c := range []struct {
		a, b int64
		fts3 bool
	}{
		{math.MaxInt64, math.MaxInt64, false}, {math.MaxInt64, math.MaxInt64, true},
		{max, max, false}, {max, 1, true}, {max + 1, 0, false}, {-1, -1, false}, {-2, 5, true},
		{math.MinInt64, math.MinInt64, false}, {0, 0, false}, {max / 2, max / 2, false},
		{math.MaxInt64 / 2, math.MaxInt64/2 + 2, true},
	} {
		f.Add(c.a, c.b, c.fts3)
	}
	svc := apitest.New(f)
	f.Fuzz(func(t *testing.T, a, b int64, fts3 bool) {
		key := "size"
		if fts3 {
			key = "filesize"
		}
		body, _ := json.Marshal(map[string]any{"files": []map[string]any{
			{"source": "sluice://a1/home/alice/x", "destination": "sluice://a2/home/alice/x", key: a},
			{"source": "sluice://a1/home/alice/y", "destination": "sluice://a2/home/alice/y", key: b},
		}})
		svc.CheckSubmit(t, body)
	})
}

// FuzzSubmitURLs posts one file with the given source, destination and
// (if not empty) a replica of the source, in Sluice's form or FTS3's.
func FuzzSubmitURLs(f *testing.F) {
	for _, c := range [][3]string{
		{"sluice://a1/home/alice/x", "sluice://a2/home/alice/y", ""},
		{"sluice://a1/home/alice/x", "sluice://a2/home/alice", ""},
		{"sluice://a1/home/alice/x", "sluice://a2/home/alice/", ""},
		{"sluice://a1/home/alice/x", "sluice://a2/home", ""},
		{"sluice://a1/home/alice/x", "sluice://a2/home/alice/../bob/y", ""},
		{"sluice://a1/home/alice/x", "sluice://a2/home/alice/%2E%2E/bob/y", ""},
		{"sluice://a1/home/alice/x", "sluice://a2/home/alice/./y/.", ""},
		{"sluice://a1/home/alice/x", "sluice://a2//home//alice//y", ""},
		{"sluice://a1/home/alice/x%00", "sluice://a2/home/alice/y", ""},
		{"sluice://a1/home/alice/x\x00", "sluice://a2/home/alice/y", ""},
		{"sluice://a1/home/alice/x%", "sluice://a2/home/alice/%zz", ""},
		{"sluice://a1/home/alice/run%3F1", "sluice://a2/home/alice/run%231%25", ""},
		{"sluice://a1/home/alice/x?q=1", "sluice://a2/home/alice/y#f", ""},
		{"sluices://127.0.0.1:7001/home/alice/x", "sluice://127.0.0.1:7002/home/alice/y", ""},
		{"sluice://a1/home/alice/x", "sluice://a2/home/alice/" + hugeName, ""},
		{"sluice://a1/home/alice/x", "sluice://a2/home/alice/" + strings.Repeat("d/", 2100) + "y", ""},
		{"sluice://a1/home/alice/x", "sluice://nowhere/home/alice/y", ""},
		{"http://a1/home/alice/x", "sluice://a2/home/alice/y", ""},
		{"sluice://a1/home/alice/x", "sluice://a2/home/alice/y", "sluice://a2/home/alice/x"},
		{"sluice://a1/home/alice/x", "sluice://a2/home/alice/y", "sluice://a2/home/alice/y"},
		{"sluice://a1/home/alice/x", "sluice://a2/home/alice/y", "sluice://a1/home/alice/x"},
		{"sluice://a1/home/alice/x", "sluice://a2/home/alice/y", "sluice://a2/etc/passwd"},
		{"sluice://a1/", "sluice://a1/", ""},
		{"", "", ""},
	} {
		f.Add(c[0], c[1], c[2])
	}
	svc := apitest.New(f)
	f.Fuzz(func(t *testing.T, src, dst, replica string) {
		file := map[string]any{"source": src, "destination": dst}
		if replica != "" {
			file = map[string]any{"sources": []string{src, replica}, "destinations": []string{dst}}
		}
		body, _ := json.Marshal(map[string]any{"files": []any{file}})
		svc.CheckSubmit(t, body)
	})
}

// FuzzSubmitFTS3 posts a job in FTS3's form: files with sources,
// destinations, filesize and checksum, and the job's params.
func FuzzSubmitFTS3(f *testing.F) {
	for _, c := range []struct {
		src, src2, dst, checksum string
		filesize                 int64
		params                   string
	}{
		{"sluice://a1/home/alice/x", "", "sluice://a2/home/alice/y", "", 10, `{"verify_checksum":"both","nostreams":4}`},
		{"sluice://a1/home/alice/x", "sluice://a2/home/alice/x", "sluice://a2/home/alice/y", "adler32:0a1b2c3d", 10, `{"verify_checksum":true}`},
		{"sluice://a1/home/alice/x", "", "sluice://a2/home/alice", "", math.MaxInt64, `{"retry":-1}`},
		{"sluice://a1/home/alice/x", "", "sluice://a2/home/alice/y", "md5:zz", -1, `{"priority":9,"nostreams":5000}`},
		{"sluice://a1/home/alice/x", "", "sluice://a2/home/alice/y", "sha256:", 0, `{"verify_checksum":"maybe"}`},
		{"sluice://a1/home/alice/x", "", "sluice://a2/home/alice/y", "", 1 << 60, `{"overwrite":true,"job_metadata":{"a":[1,2]},"nostreams":null}`},
		{"sluice://a1/home/alice/x", "", "sluice://a2/home/alice/y", "", 1, `[]`},
		{"sluice://a1/home/alice/x", "", "sluice://a2/home/alice/y", "", 1, `"x"`},
	} {
		f.Add(c.src, c.src2, c.dst, c.checksum, c.filesize, c.params)
	}
	svc := apitest.New(f)
	f.Fuzz(func(t *testing.T, src, src2, dst, checksum string, filesize int64, params string) {
		sources := []string{src}
		if src2 != "" {
			sources = append(sources, src2)
		}
		file := map[string]any{"sources": sources, "destinations": []string{dst}, "filesize": filesize, "metadata": map[string]string{"k": "v"}, "activity": "default"}
		if checksum != "" {
			file["checksum"] = checksum
		}
		job := map[string]any{"files": []any{file}}
		if json.Valid([]byte(params)) {
			job["params"] = json.RawMessage(params)
		}
		body, _ := json.Marshal(job)
		svc.CheckSubmit(t, body)
	})
}
