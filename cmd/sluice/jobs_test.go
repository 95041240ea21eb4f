package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/api"
	"github.com/sluice-dtn/sluice/store"
)

// fakeAPI is a stand-in for `sluice serve` that answers the job
// operations the CLI uses: a submission creates job 1 in state active,
// and reading it gives it in state final. It keeps the bodies submitted.
type fakeAPI struct {
	final  api.JobOut
	mu     sync.Mutex
	bodies []string
}

func (f *fakeAPI) serve(t *testing.T) {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.bodies = append(f.bodies, string(b))
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(api.JobOut{ID: 1, State: store.StateActive, Files: f.final.Files, Created: time.Now()})
	})
	mux.HandleFunc("GET /v1/jobs/1", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(f.final)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Setenv("SLUICE_SERVER", srv.URL)
	t.Setenv("SLUICE_TOKEN", "sk_test")
	t.Setenv("SLUICE_CONFIG", filepath.Join(t.TempDir(), "client.json"))
}

// TestSubmitWatchExitStatus: `sluice submit --watch` fails (exit status
// 1) when the job ends other than done, as `sluice watch` does, so that
// `sluice submit --watch ... && next-step` does not go on after a failed
// transfer. Before, it exited 0 whatever the job's end.
func TestSubmitWatchExitStatus(t *testing.T) {
	for _, tc := range []struct {
		state   string
		wantErr bool
	}{
		{store.StateDone, false},
		{store.StateFailed, true},
		{store.StateCanceled, true},
	} {
		t.Run(tc.state, func(t *testing.T) {
			f := &fakeAPI{final: api.JobOut{ID: 1, State: tc.state, Files: 2, Created: time.Now(), Finished: new(time.Now())}}
			switch tc.state {
			case store.StateDone:
				f.final.FilesDone = 2
			case store.StateFailed:
				f.final.FilesDone, f.final.FilesFailed = 1, 1
			case store.StateCanceled:
				f.final.FilesCanceled = 2
			}
			f.serve(t)
			for _, args := range [][]string{
				{"submit", "sluice://a1/x", "sluice://a2/x", "--watch"},
				{"submit", "sluice://a1/x", "sluice://a2/x", "--watch", "--json"},
				{"watch", "1"},
			} {
				out, err := run(t, args...)
				if (err != nil) != tc.wantErr {
					t.Errorf("%s: error %v, want an error: %v\n%s", strings.Join(args, " "), err, tc.wantErr, out)
				}
				if err != nil && !strings.Contains(err.Error(), tc.state) {
					t.Errorf("%s: %q does not say the job ended %s", strings.Join(args, " "), err, tc.state)
				}
			}
		})
	}
}

// TestSubmitFTS3File: `sluice submit -f` takes an FTS3 job file as FTS3
// tools write it: its params may hold parameters Sluice does not use
// (overwrite, job_metadata, ...), which the API accepts and ignores.
// Before, the CLI refused the file itself (json: unknown field
// "overwrite") although the server takes the same JSON. A misspelt
// field of the job or of a file is still refused.
func TestSubmitFTS3File(t *testing.T) {
	f := &fakeAPI{final: api.JobOut{ID: 1, State: store.StateDone, Files: 1, FilesDone: 1}}
	f.serve(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		name, job string
		ok        bool
		want      string // in the body sent, or in the error
	}{
		{"fts3 params", `{"files":[{"sources":["sluice://a1/x"],"destinations":["sluice://a2/x"],"filesize":10}],
			"params":{"verify_checksum":"both","retry":2,"overwrite":true,"job_metadata":{"run":7},"max_time_in_queue":3600}}`, true, `"retry":2`},
		{"misspelt job field", `{"files":[{"source":"sluice://a1/x","destination":"sluice://a2/x"}],"lable":"x"}`, false, "lable"},
		{"misspelt file field", `{"files":[{"source":"sluice://a1/x","destinaton":"sluice://a2/x"}]}`, false, "destinaton"},
		{"bad params type", `{"files":[{"source":"sluice://a1/x","destination":"sluice://a2/x"}],"params":{"retry":"two"}}`, false, "retry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".json")
			if err := os.WriteFile(file, []byte(tc.job), 0o644); err != nil {
				t.Fatal(err)
			}
			f.mu.Lock()
			f.bodies = nil
			f.mu.Unlock()
			out, err := run(t, "submit", "-f", file)
			f.mu.Lock()
			bodies := f.bodies
			f.mu.Unlock()
			switch {
			case tc.ok && err != nil:
				t.Fatalf("submit -f: %v\n%s", err, out)
			case tc.ok && (len(bodies) != 1 || !strings.Contains(bodies[0], tc.want)):
				t.Fatalf("sent %q, want one job with %s", bodies, tc.want)
			case !tc.ok && err == nil:
				t.Fatalf("submit -f accepted %s:\n%s", tc.job, out)
			case !tc.ok && !strings.Contains(err.Error(), tc.want):
				t.Errorf("error %q does not name %s", err, tc.want)
			}
		})
	}
}

// TestSubmitFileIgnoredFlags: a flag `sluice submit -f` would not apply
// is refused, naming it, and nothing is submitted. Before, a Stork
// submit file went in without --batch, --label, --streams, ... and
// --watch did not watch; --sources beside a job file was dropped: the
// job ran other than asked, and nothing said so.
func TestSubmitFileIgnoredFlags(t *testing.T) {
	f := &fakeAPI{final: api.JobOut{ID: 1, State: store.StateDone, Files: 1, FilesDone: 1}}
	f.serve(t)
	dir := t.TempDir()
	ad := filepath.Join(dir, "job.classad")
	if err := os.WriteFile(ad, []byte(`[ dap_type = "transfer"; src_url = "sluice://a1/x"; dest_url = "sluice://a2/x"; ]`), 0o644); err != nil {
		t.Fatal(err)
	}
	js := filepath.Join(dir, "job.json")
	if err := os.WriteFile(js, []byte(`{"files":[{"source":"sluice://a1/x","destination":"sluice://a2/x"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string // in the error; "" accepted
	}{
		{[]string{"-f", ad}, ""},
		{[]string{"-f", ad, "--json"}, ""},
		{[]string{"-f", ad, "--batch"}, "--batch"},
		{[]string{"-f", ad, "--label", "nightly", "--streams", "4"}, "--label, --streams"},
		{[]string{"-f", ad, "--watch"}, "--watch"},
		{[]string{"-f", js, "--batch", "--label", "x", "--streams", "2", "--watch"}, ""},
		{[]string{"-f", js, "--sources", "sluice://a1/x,sluice://a3/x"}, "--sources"},
	} {
		t.Run(strings.Join(tc.args[2:], " "), func(t *testing.T) {
			f.mu.Lock()
			f.bodies = nil
			f.mu.Unlock()
			out, err := run(t, append([]string{"submit"}, tc.args...)...)
			f.mu.Lock()
			sent := len(f.bodies)
			f.mu.Unlock()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("%v\n%s", err, out)
			case tc.want == "" && sent != 1:
				t.Fatalf("%d jobs sent, want 1", sent)
			case tc.want == "":
			case err == nil || !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error %v, want one naming %s", err, tc.want)
			case sent != 0:
				t.Fatalf("%d jobs sent after the refusal", sent)
			}
		})
	}
}

// TestSubmitFileOneJob: a JSON job file holds one job. Before, a file
// with a second job (or anything else) after the first submitted the
// first and dropped the rest without a word.
func TestSubmitFileOneJob(t *testing.T) {
	f := &fakeAPI{final: api.JobOut{ID: 1, State: store.StateDone, Files: 1, FilesDone: 1}}
	f.serve(t)
	job := `{"files":[{"source":"sluice://a1/x","destination":"sluice://a2/x"}]}`
	for _, tc := range []struct {
		name, content string
		ok            bool
	}{
		{"one job", job, true},
		{"one job and blank lines", "\n" + job + "\n\n \t\n", true},
		{"two jobs", job + "\n" + strings.ReplaceAll(job, "/x", "/y"), false},
		{"trailing text", job + " oops", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "job.json")
			if err := os.WriteFile(file, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			f.mu.Lock()
			f.bodies = nil
			f.mu.Unlock()
			out, err := run(t, "submit", "-f", file)
			f.mu.Lock()
			sent := len(f.bodies)
			f.mu.Unlock()
			switch {
			case tc.ok && (err != nil || sent != 1):
				t.Fatalf("%d jobs sent, err %v\n%s", sent, err, out)
			case !tc.ok && (err == nil || sent != 0):
				t.Fatalf("%d jobs sent, err %v; want a refusal and none sent", sent, err)
			}
		})
	}
}

// TestSubmitWatchStdoutIsJobID: `sluice submit --watch` prints the job id
// alone on stdout, as submit says it does, and the progress and the
// job's summary on stderr, so that JOB=$(sluice submit ... --watch)
// (scripts/demo.sh, `make run`) gets the id. Before, the summary went to
// stdout after the id and the demo's next command failed with
// "... is not a job id".
func TestSubmitWatchStdoutIsJobID(t *testing.T) {
	f := &fakeAPI{final: api.JobOut{ID: 1, State: store.StateDone, Files: 2, FilesDone: 2, Created: time.Now(), Finished: new(time.Now())}}
	f.serve(t)
	root := newRoot()
	var stdout, stderr bytes.Buffer
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	root.SetArgs([]string{"submit", "sluice://a1/x", "sluice://a2/x", "--watch"})
	if err := root.Execute(); err != nil {
		t.Fatalf("submit --watch: %v\n%s", err, stderr.String())
	}
	if got := stdout.String(); got != "1\n" {
		t.Errorf("stdout %q, want the job id alone", got)
	}
	if !strings.Contains(stderr.String(), "job 1 (done") {
		t.Errorf("stderr %q does not hold the job's summary", stderr.String())
	}
}
