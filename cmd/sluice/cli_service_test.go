package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-dtn/sluice/api"
	"github.com/sluice-dtn/sluice/client"
	"github.com/sluice-dtn/sluice/store"
)

// TestServiceCLIOutput: against a live server, every command a scientist
// scripts prints one JSON document on stdout with --json; status and
// watch exit 1 for a job that failed in part (some files done, one
// failed) as for one that failed whole; and the job list pages.
func TestServiceCLIOutput(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	c := newClusterSerial(t, 2)
	t.Setenv("SLUICE_SERVER", "")
	t.Setenv("SLUICE_TOKEN", "")
	t.Setenv("SLUICE_CONFIG", filepath.Join(c.dir, "client.json"))
	// The token file given as @~/...: the shell leaves that ~ alone.
	t.Setenv("HOME", filepath.Join(c.dir, "data"))
	jsonOf := func(args ...string) (map[string]any, error) {
		t.Helper()
		out, errs, err := runSplit(t, args...)
		var v map[string]any
		if jerr := json.Unmarshal([]byte(out), &v); jerr != nil {
			t.Fatalf("%v printed %q on stdout, not one JSON object: %v (stderr %q, error %v)", args, out, jerr, errs, err)
		}
		return v, err
	}
	login, err := jsonOf("login", "--server", "http://"+c.addr, "--token", "@~/admin.token", "--json")
	if err != nil || login["server"] != "http://"+c.addr || login["user"].(map[string]any)["name"] != "admin" {
		t.Fatalf("login --json: %v %v", err, login)
	}

	// A job with one file done and one failed: partly failed.
	c.file("a1", "out/one", 1<<20, 1)
	job := filepath.Join(c.dir, "part.json")
	os.WriteFile(job, []byte(`{"files":[{"source":"sluice://a1/out/one","destination":"sluice://a2/out/one"},
		{"source":"sluice://a1/out/missing","destination":"sluice://a2/out/missing"}]}`), 0o644)
	sub, err := jsonOf("submit", "-f", job, "--json", "--watch")
	if err == nil || exitCode(err) != 1 {
		t.Errorf("submit --watch of a partly failed job: %v, want exit status 1", err)
	}
	part := strconv.FormatFloat(sub["id"].(float64), 'f', -1, 64)
	c.file("a1", "out/two", 1<<20, 2)
	out, err := run(t, "submit", "sluice://a1/out/two", "sluice://a2/out/two")
	if err != nil {
		t.Fatal(err)
	}
	done := strings.TrimSpace(out)
	for _, tc := range []struct {
		args  []string
		state string // the job's state in the JSON ("": not a job)
		fail  string // in the error ("": none)
	}{
		{[]string{"watch", done, "--json"}, store.StateDone, ""},
		{[]string{"status", done, "--json"}, store.StateDone, ""},
		{[]string{"status", part, "--json"}, store.StateFailed, "partly failed"},
		{[]string{"status", part, "--json", "--files"}, store.StateFailed, "partly failed"},
		{[]string{"watch", part, "--json"}, store.StateFailed, "partly failed"},
		{[]string{"cancel", done, "--json"}, store.StateDone, ""},
		{[]string{"endpoint", "add", "ftpx", "ftp://127.0.0.1:1", "--via", "a1", "--json"}, "", ""},
		{[]string{"endpoint", "rm", "ftpx", "--json"}, "", ""},
		{[]string{"access", "show", "--json"}, "", ""},
		{[]string{"api-token", "create", "--user", "dora", "--vo", "cms", "--json"}, "", ""},
	} {
		v, err := jsonOf(tc.args...)
		switch {
		case tc.fail == "" && err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case tc.fail != "" && (err == nil || exitCode(err) != 1 || !strings.Contains(err.Error(), tc.fail)):
			t.Errorf("%v: error %v, want exit status 1 and %q", tc.args, err, tc.fail)
		}
		if tc.state != "" && v["state"] != tc.state {
			t.Errorf("%v: state %v, want %s", tc.args, v["state"], tc.state)
		}
	}
	// The text of both exits 1 too, and says what failed.
	for _, args := range [][]string{{"status", part}, {"watch", part}} {
		out, err := run(t, args...)
		if err == nil || exitCode(err) != 1 || !strings.Contains(err.Error(), "1 of 2 files done, 1 failed") {
			t.Errorf("%v: %v, want exit status 1 and the count\n%s", args, err, out)
		}
	}
	for _, args := range [][]string{{"endpoints", "--json"}, {"api-token", "list", "--json"}} {
		out, _, err := runSplit(t, args...)
		var v []map[string]any
		if err != nil || json.Unmarshal([]byte(out), &v) != nil || len(v) == 0 {
			t.Errorf("%v: %v, want a JSON list\n%s", args, err, out)
		}
	}
	rules := filepath.Join(c.dir, "access.json")
	os.WriteFile(rules, []byte(`{"rules":[{"endpoint":"*","path":"/home/{user}","user":"*","access":"write"}]}`), 0o644)
	if v, err := jsonOf("access", "set", rules, "--json"); err != nil || len(v["rules"].([]any)) != 1 {
		t.Errorf("access set --json: %v %v", err, v)
	}
	if _, err := run(t, "api-token", "create", "--label", "spare"); err != nil {
		t.Fatal(err)
	}
	toks, _, _ := runSplit(t, "api-token", "list", "--json")
	var list []struct{ ID, Label string }
	json.Unmarshal([]byte(toks), &list)
	spare := slices.IndexFunc(list, func(x struct{ ID, Label string }) bool { return x.Label == "spare" })
	if spare < 0 {
		t.Fatalf("api-token list --json: no token labelled spare\n%s", toks)
	}
	if v, err := jsonOf("api-token", "revoke", list[spare].ID, "--json"); err != nil || v["revoked"] != true {
		t.Errorf("api-token revoke --json: %v %v", err, v)
	}

	// Paging: more jobs than a page, listed page by page.
	for i := range 5 {
		if _, err := run(t, "submit", fmt.Sprintf("sluice://a1/nothing/%d", i), fmt.Sprintf("sluice://a2/nothing/%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	all := jobIDs(t, "status", "--limit", "0")
	if len(all) != 7 || !slices.IsSortedFunc(all, func(a, b int64) int { return int(b - a) }) {
		t.Fatalf("status --limit 0 lists %v, want the 7 jobs newest first", all)
	}
	var paged []int64
	args := []string{"status", "--limit", "3"}
	for pages := 0; ; pages++ {
		out, errs, err := runSplit(t, append(args, "--json")...)
		var js []api.JobOut
		if err != nil || json.Unmarshal([]byte(out), &js) != nil || len(js) > 3 {
			t.Fatalf("%v: %v, want at most 3 jobs\n%s", args, err, out)
		}
		for _, j := range js {
			paged = append(paged, j.ID)
		}
		next, more := strings.CutPrefix(strings.TrimSpace(errs), "more jobs: sluice status --before ")
		if !more {
			if errs != "" {
				t.Errorf("%v: stderr %q", args, errs)
			}
			break
		}
		if pages > 3 {
			t.Fatalf("%v: still more after %d pages", args, pages)
		}
		args = []string{"status", "--limit", "3", "--before", next}
	}
	if !slices.Equal(paged, all) {
		t.Errorf("pages of 3 list %v, want %v", paged, all)
	}
	if got := jobIDs(t, "status", "--before", strconv.FormatInt(all[4], 10)); !slices.Equal(got, all[5:]) {
		t.Errorf("status --before %d lists %v, want %v", all[4], got, all[5:])
	}
	// The client asks page by page for more than one page.
	cl, err := client.New("http://"+c.addr, c.adminTo, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []client.JobsQuery{{Page: 2}, {Page: 2, Limit: 5}, {Page: 3, Before: all[1]}} {
		js, err := cl.ListJobs(context.Background(), q)
		want := all
		if q.Before != 0 {
			want = all[2:]
		}
		if q.Limit != 0 {
			want = want[:q.Limit]
		}
		var got []int64
		for _, j := range js {
			got = append(got, j.ID)
		}
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("ListJobs(%+v): %v %v, want %v", q, got, err, want)
		}
	}
	if _, err := run(t, "status", done, "--limit", "3"); err == nil {
		t.Error("status JOB --limit: accepted, but --limit is for lists")
	}
}

// jobIDs runs a status listing with --json and returns the jobs' IDs.
func jobIDs(t *testing.T, args ...string) []int64 {
	t.Helper()
	out, errs, err := runSplit(t, append(args, "--json")...)
	var js []api.JobOut
	if err != nil || json.Unmarshal([]byte(out), &js) != nil {
		t.Fatalf("%v: %v\n%s%s", args, err, out, errs)
	}
	var ids []int64
	for _, j := range js {
		ids = append(ids, j.ID)
	}
	return ids
}
