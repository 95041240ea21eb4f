package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fts3Python is the Python that has FTS3's client (package fts3):
// $SLUICE_FTS3_PYTHON (scripts/ci-deps.sh sets it), else the
// repository's .cache/fts3-venv, else python3; "" with why if none has it.
func fts3Python() (string, string) {
	candidates := []string{os.Getenv("SLUICE_FTS3_PYTHON"), filepath.Join("..", "..", ".cache", "fts3-venv", "bin", "python"), "python3"}
	var why []string
	for _, py := range candidates {
		if py == "" {
			continue
		}
		out, err := exec.Command(py, "-c", "import fts3.rest.client.easy").CombinedOutput()
		if err == nil {
			return py, ""
		}
		why = append(why, fmt.Sprintf("%s: %v %s", py, err, strings.TrimSpace(lastLine(string(out)))))
	}
	return "", strings.Join(why, "; ")
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndex(s, "\n")+1:]
}

// TestFTS3Client drives the service's FTS3 API (/fts3) with FTS3's own
// Python client, as Rucio-style tools do: whoami, a job of two files
// followed to FINISHED with their checksums, a missing source FAILED with
// a reason, a long job canceled, a wrong token refused, and a parameter
// Sluice refuses (bring_online).
func TestFTS3Client(t *testing.T) {
	py, why := fts3Python()
	if py == "" {
		t.Skipf("FTS3's Python client (pip package fts3, which needs M2Crypto) is not installed; scripts/ci-deps.sh installs it: %s", why)
	}
	c := newCluster(t, 2)
	c.addEmulated("slow", `{"capacity_bps": 16e6}`) // 2 MB/s: the long job takes half a minute
	c.file("a1", "fts3/one", 1<<20, 1)
	two := c.file("a1", "fts3/two", 300_001, 2)
	c.file("slow", "fts3/big", 64<<20, 3)
	type file struct {
		Source      string `json:"source"`
		Destination string `json:"destination"`
		Path        string `json:"path,omitempty"`
	}
	spec, err := json.Marshal(map[string]any{
		"files": []file{
			{"sluice://a1/fts3/one", "sluice://a2/fts3/one", c.path("a1", "fts3/one")},
			{"sluice://a1/fts3/two", "sluice://a2/fts3/two", two},
		},
		"missing": file{Source: "sluice://a1/fts3/missing", Destination: "sluice://a2/fts3/missing"},
		"long":    file{Source: "sluice://slow/fts3/big", Destination: "sluice://a2/fts3/big"},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, filepath.Join("..", "..", "tests", "fts3", "client_check.py"))
	cmd.Env = append(os.Environ(), "FTS3_ENDPOINT=http://"+c.addr+"/fts3", "FTS3_TOKEN="+c.adminTo, "FTS3_CASE="+string(spec))
	out, err := cmd.CombinedOutput()
	t.Logf("FTS3 client:\n%s", out)
	if err != nil {
		t.Fatalf("the FTS3 client's checks failed: %v", err)
	}
	for _, want := range []string{"ok whoami admin", "ok finished", "ok failed", "ok canceled", "ok unauthorized", "ok refused", "ALL OK"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the FTS3 client did not print %q", want)
		}
	}
	// What the client saw on disk: the two files copied whole.
	for _, rel := range []string{"fts3/one", "fts3/two"} {
		a, _ := os.ReadFile(c.path("a1", rel))
		b, err := os.ReadFile(c.path("a2", rel))
		if err != nil || string(a) != string(b) {
			t.Errorf("%s: the copy differs from its source (%v)", rel, err)
		}
	}
	if _, err := os.Stat(c.path("a2", "fts3/big")); err == nil {
		t.Errorf("the canceled job's file is at its destination")
	}
}

// TestFTS3Routes checks what FTS3's API answers without its client: FTS3's
// error documents, 501 for FTS3's calls Sluice does not serve, 404 for
// paths FTS3 has not either, the doubled slashes FTS3's client sends, and
// the warnings of a submission.
func TestFTS3Routes(t *testing.T) {
	c := newCluster(t, 2)
	c.file("a1", "r/one", 1000, 1)
	do := func(method, path, tok, body string) (int, map[string]any) {
		t.Helper()
		req, err := http.NewRequest(method, "http://"+c.addr+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		b, _ := io.ReadAll(resp.Body)
		_ = json.Unmarshal(b, &m)
		t.Logf("%s %s: %d %s", method, path, resp.StatusCode, bytes.TrimSpace(b))
		return resp.StatusCode, m
	}
	const job = `{"files":[{"sources":["sluice://a1/r/one"],"destinations":["sluice://a2/r/one"],"checksum":"ADLER32","activity":"User Subscriptions","selection_strategy":"auto","scitag":65}],
		"delete":null,"params":{"verify_checksum":true,"retry":-1,"priority":null,"id_generator":"standard","destination_spacetoken":"DATADISK","nostreams":1}}`
	for _, tc := range []struct {
		name, method, path, tok, body string
		status                        int
		message                       string // in the answer's message
	}{
		{"root, doubled slash", "GET", "/fts3//", c.adminTo, "", 200, ""},
		{"no token", "GET", "/fts3/whoami", "", "", 401, "no bearer token"},
		{"delegation", "GET", "/fts3//delegation/abc", c.adminTo, "", 501, "not supported by Sluice's FTS3 API: delegation"},
		{"config", "GET", "/fts3/config/global", c.adminTo, "", 501, "not supported"},
		{"list jobs", "GET", "/fts3/jobs", c.adminTo, "", 501, "GET /v1/jobs"},
		{"cancel files", "DELETE", "/fts3/jobs/1/files/2", c.adminTo, "", 501, "cancel the whole job"},
		{"unknown", "GET", "/fts3/nothing", c.adminTo, "", 404, "no such FTS3 resource"},
		{"missing job", "GET", "/fts3//jobs/999", c.adminTo, "", 404, "job 999"},
		{"not a job id", "GET", "/fts3/jobs/0f2e-uuid", c.adminTo, "", 404, "numbers"},
		{"deletion job", "POST", "/fts3//jobs", c.adminTo, `{"files":[],"delete":[{"surl":"sluice://a1/r/one"}]}`, 400, "deletion jobs are not supported"},
		{"staging metadata", "POST", "/fts3/jobs", c.adminTo, `{"files":[{"sources":["sluice://a1/r/one"],"destinations":["sluice://a2/r/x"],"staging_metadata":{"a":1}}],"params":{}}`, 400, "staging"},
		{"schema", "POST", "/fts3/jobs", c.adminTo, `{"files":[{"sources":["sluice://a1/r/one"],"destinations":["sluice://a2/r/x"],"filesize":-3}],"params":{}}`, 400, "files[0].filesize"},
		{"submit", "POST", "/fts3//jobs", c.adminTo, job, 200, ""},
	} {
		status, m := do(tc.method, tc.path, tc.tok, tc.body)
		msg, _ := m["message"].(string)
		if status != tc.status || !strings.Contains(msg, tc.message) {
			t.Errorf("%s: %d %q, want %d with %q", tc.name, status, msg, tc.status, tc.message)
		}
		if tc.name != "submit" {
			continue
		}
		ws := fmt.Sprint(m["warnings"])
		for _, w := range []string{"files[].activity", "files[].scitag", "params.destination_spacetoken"} {
			if !strings.Contains(ws, w) {
				t.Errorf("the submission's warnings do not name %s: %s", w, ws)
			}
		}
		if strings.Contains(ws, "selection_strategy") || strings.Contains(ws, "id_generator") || strings.Contains(ws, "retry") {
			t.Errorf("warnings about values that ask for nothing: %s", ws)
		}
		id, _ := m["job_id"].(string)
		j := c.waitJob(c.admin, mustID(t, id), time.Minute)
		if j.State != "done" || j.Checksum != "adler32" || !j.VerifyChecksum {
			t.Errorf("the job: %+v", j)
		}
		if status, m := do("GET", "/fts3/jobs/"+id+",999?files=file_state,checksum", c.adminTo, ""); status != http.StatusMultiStatus || m != nil {
			t.Errorf("two jobs, one missing: %d (want 207 and a list)", status)
		}
		if status, m := do("DELETE", "/fts3/jobs/"+id, c.adminTo, ""); status != 200 || m["http_status"] != "304 Not Modified" || m["job_state"] != "FINISHED" {
			t.Errorf("canceling a finished job: %d %v", status, m)
		}
	}
}

func mustID(t *testing.T, s string) int64 {
	t.Helper()
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("job id %q: %v", s, err)
	}
	return id
}
