package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/api"
	"github.com/sluice-dtn/sluice/api/apitest"
	"github.com/sluice-dtn/sluice/store"
)

// The console's API: /v1/history and /v1/failures answer with the
// caller's own transfers (an admin's: everyone's, or one user's or VO's),
// and refuse a user who asks for another's; /v1/jobs takes the same
// filters and a label search.
func TestHistoryAndFailuresAPI(t *testing.T) {
	ts := apitest.New(t)
	ctx := context.Background()
	alice, err := ts.St.UserByName(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	submit := func(tok, label string) api.JobOut {
		rec := ts.Do("POST", "/v1/jobs", tok, fmt.Sprintf(`{"label": %q, "files": [{"source": "sluice://a1/home/alice/x", "destination": "sluice://a2/home/alice/y", "size": 10}]}`, label))
		var j api.JobOut
		if rec.Code != http.StatusCreated || json.Unmarshal(rec.Body.Bytes(), &j) != nil {
			t.Fatalf("submit %s: %d %s", label, rec.Code, rec.Body)
		}
		return j
	}
	mine := submit(ts.Alice, "Run42 raw")
	theirs := submit(ts.Admin, "calibration")
	// Alice's file fails (as the loop would write it).
	tasks, err := ts.St.Tasks(ctx, mine.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	tasks[0].State, tasks[0].Error, tasks[0].Finished = store.StateFailed, "checksum mismatch", now
	if err := ts.St.UpdateTasks(ctx, tasks, nil); err != nil {
		t.Fatal(err)
	}
	// A minute of history: the server's marks and a sample of each
	// owner's a1->a2.
	t0 := now.Truncate(time.Minute).Add(-time.Minute)
	samples := []store.Sample{
		{Server: "local", At: t0, Seconds: 30}, {Server: "local", At: t0.Add(30 * time.Second), Seconds: 30},
		{Server: "local", At: t0, Src: "a1", Dst: "a2", OwnerID: alice.ID, VO: "cms", Bytes: 3000, Queued: 2, Running: 1},
		{Server: "local", At: t0.Add(30 * time.Second), Src: "a1", Dst: "a2", OwnerID: 1, VO: "admin", Bytes: 6000, Running: 2, Failed: 1},
	}
	if err := ts.St.AddSamples(ctx, samples, time.Time{}); err != nil {
		t.Fatal(err)
	}
	rng := "from=" + url.QueryEscape(t0.Format(time.RFC3339)) + "&to=" + url.QueryEscape(t0.Add(time.Minute).Format(time.RFC3339)) + "&step=60"

	type failures = []api.FailureOut
	for _, tc := range []struct {
		name, tok, path string
		status          int
		check           func(t *testing.T, body []byte)
	}{
		{"history needs a token", "", "/v1/history", http.StatusUnauthorized, nil},
		{"failures need a token", "", "/v1/failures", http.StatusUnauthorized, nil},
		{"alice: her history", ts.Alice, "/v1/history?" + rng, http.StatusOK, func(t *testing.T, b []byte) {
			h := decode[api.HistoryOut](t, b)
			// 3000 bytes over the minute's 60 s of samples; her 2
			// queued and 1 running at one of its two samples.
			if len(h.Times) != 1 || h.Step != 60 || *h.Total.Throughput[0] != 50 || *h.Total.Queued[0] != 1 || *h.Total.Running[0] != 0.5 || h.Total.Failures != 0 {
				t.Errorf("history %+v, total %s", h, b)
			}
			if len(h.Links) != 1 || h.Links[0].Source != "a1" || h.Links[0].Destination != "a2" || len(h.Endpoints) != 2 {
				t.Errorf("links %+v endpoints %+v", h.Links, h.Endpoints)
			}
		}},
		{"admin: everyone's history", ts.Admin, "/v1/history?" + rng, http.StatusOK, func(t *testing.T, b []byte) {
			h := decode[api.HistoryOut](t, b)
			if *h.Total.Throughput[0] != 150 || *h.Total.Running[0] != 1.5 || h.Total.Failures != 1 || h.Servers[0] != "local" {
				t.Errorf("history %s", b)
			}
		}},
		{"admin: VO cms's history", ts.Admin, "/v1/history?vo=cms&" + rng, http.StatusOK, func(t *testing.T, b []byte) {
			if h := decode[api.HistoryOut](t, b); *h.Total.Throughput[0] != 50 {
				t.Errorf("history %s", b)
			}
		}},
		{"alice may not ask for another's history", ts.Alice, "/v1/history?user=admin", http.StatusForbidden, nil},
		{"an unknown user", ts.Admin, "/v1/history?user=nobody", http.StatusNotFound, nil},
		{"from after to", ts.Admin, "/v1/history?from=" + ago(time.Hour) + "&to=" + ago(2*time.Hour), http.StatusUnprocessableEntity, nil},
		{"too many points", ts.Admin, "/v1/history?from=" + ago(20*time.Hour) + "&to=" + ago(0) + "&step=15", http.StatusUnprocessableEntity, nil},
		{"before anything is kept", ts.Admin, "/v1/history?from=" + ago(50*time.Hour) + "&to=" + ago(40*time.Hour), http.StatusUnprocessableEntity, nil},
		{"far past and future: cut to what is kept", ts.Admin, "/v1/history?from=1970-01-01T00:00:00Z&to=9999-12-31T00:00:00Z", http.StatusOK, func(t *testing.T, b []byte) {
			h := decode[api.HistoryOut](t, b)
			if d := h.To.Sub(h.From); d < 24*time.Hour || d > 26*time.Hour || len(h.Times) > 1000 {
				t.Errorf("from %v to %v, %d points", h.From, h.To, len(h.Times))
			}
		}},
		{"alice: her failure", ts.Alice, "/v1/failures", http.StatusOK, func(t *testing.T, b []byte) {
			fs := decode[failures](t, b)
			if len(fs) != 1 || fs[0].Job != mine.ID || fs[0].Index != 0 || fs[0].Error != "checksum mismatch" || fs[0].Owner != "alice" ||
				fs[0].VO != "cms" || fs[0].Label != "Run42 raw" || fs[0].Source != "sluice://a1/home/alice/x" || fs[0].SrcEndpoint != "a1" || !fs[0].Finished.Equal(now) {
				t.Errorf("failures %s", b)
			}
		}},
		{"admin: a search", ts.Admin, "/v1/failures?q=CHECKSUM", http.StatusOK, func(t *testing.T, b []byte) {
			if fs := decode[failures](t, b); len(fs) != 1 {
				t.Errorf("failures %s", b)
			}
		}},
		{"admin: another VO's", ts.Admin, "/v1/failures?vo=admin", http.StatusOK, func(t *testing.T, b []byte) {
			if fs := decode[failures](t, b); len(fs) != 0 {
				t.Errorf("failures %s", b)
			}
		}},
		{"alice may not ask for another's failures", ts.Alice, "/v1/failures?user=admin", http.StatusForbidden, nil},
		{"admin: alice's jobs", ts.Admin, "/v1/jobs?user=alice", http.StatusOK, func(t *testing.T, b []byte) {
			if js := decode[[]api.JobOut](t, b); len(js) != 1 || js[0].ID != mine.ID {
				t.Errorf("jobs %s", b)
			}
		}},
		{"admin: a label search", ts.Admin, "/v1/jobs?q=CALIB", http.StatusOK, func(t *testing.T, b []byte) {
			if js := decode[[]api.JobOut](t, b); len(js) != 1 || js[0].ID != theirs.ID {
				t.Errorf("jobs %s", b)
			}
		}},
		{"alice may not list another's jobs", ts.Alice, "/v1/jobs?user=admin", http.StatusForbidden, nil},
		{"alice's jobs in another VO: none", ts.Alice, "/v1/jobs?vo=admin", http.StatusOK, func(t *testing.T, b []byte) {
			if js := decode[[]api.JobOut](t, b); len(js) != 0 {
				t.Errorf("jobs %s", b)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := ts.Do("GET", tc.path, tc.tok, "")
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.status, rec.Body)
			}
			if tc.check != nil {
				tc.check(t, rec.Body.Bytes())
			}
		})
	}
}

// ago is the time d before now, as a query parameter.
func ago(d time.Duration) string {
	return url.QueryEscape(time.Now().Add(-d).UTC().Format(time.RFC3339))
}

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return v
}

// The API reference at /docs is the page served from the binary, which
// loads nothing from another origin, and it describes the console's
// operations.
func TestDocsFromBinary(t *testing.T) {
	ts := apitest.New(t)
	rec := ts.Do("GET", "/docs", "", "")
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `<script src="/docs/swagger-ui-bundle.js">`) {
		t.Fatalf("/docs: %d %s", rec.Code, rec.Body)
	}
	if strings.Contains(rec.Body.String(), "unpkg.com") || strings.Contains(rec.Body.String(), "https://") {
		t.Errorf("/docs refers to another origin:\n%s", rec.Body)
	}
	if rec := ts.Do("GET", "/docs/swagger-ui-bundle.js", "", ""); rec.Code != http.StatusOK {
		t.Errorf("/docs/swagger-ui-bundle.js: %d", rec.Code)
	}
	doc := ts.Do("GET", "/openapi.json", "", "").Body.String()
	for _, op := range []string{`"/v1/history"`, `"/v1/failures"`, `"operationId":"history"`} {
		if !strings.Contains(doc, op) {
			t.Errorf("/openapi.json lacks %s", op)
		}
	}
}
