package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/danielgtaylor/huma/v2"

	"github.com/sluice-dtn/sluice/api/apitest"
)

// TestProblemEverywhere: every error the API server answers is a problem
// document (application/problem+json, with its status and a detail),
// the mux's own answers included: an unknown path (404), a method a path
// does not take (405, with Allow), and the redirects of unclean paths
// (307, with Location, so that clients that follow them still do).
// Before, these were text/plain ("404 page not found").
func TestProblemEverywhere(t *testing.T) {
	ts := apitest.New(t)
	for _, tc := range []struct {
		method, path string
		status       int
		header       string // that must be kept
		detail       string
	}{
		{"GET", "/nowhere", http.StatusNotFound, "", "no such path: /nowhere"},
		{"GET", "/v1/nope", http.StatusNotFound, "", "no such path"},
		{"PUT", "/v1/jobs", http.StatusMethodNotAllowed, "Allow", "PUT is not allowed on /v1/jobs"},
		{"PATCH", "/healthz", http.StatusMethodNotAllowed, "Allow", "allowed: GET"},
		{"GET", "/v1//jobs", http.StatusTemporaryRedirect, "Location", "the resource is at /v1/jobs"},
		{"GET", "/v1/./jobs/../jobs", http.StatusTemporaryRedirect, "Location", "/v1/jobs"},
		{"GET", "/ui", http.StatusTemporaryRedirect, "Location", "/ui/"},
		{"GET", "/v1/jobs/12345", http.StatusNotFound, "", "job 12345"}, // huma's own, untouched
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			rec := ts.Do(tc.method, tc.path, ts.Admin, "")
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.status, rec.Body)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
				t.Errorf("Content-Type %q, want application/problem+json", ct)
			}
			var e huma.ErrorModel
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
				t.Fatalf("body %q: %v", rec.Body, err)
			}
			if e.Status != tc.status || e.Title != http.StatusText(tc.status) || !strings.Contains(e.Detail, tc.detail) {
				t.Errorf("problem %+v; want status %d, detail naming %q", e, tc.status, tc.detail)
			}
			if tc.header != "" && rec.Header().Get(tc.header) == "" {
				t.Errorf("no %s header", tc.header)
			}
		})
	}
	// Answers that are not errors pass through as they were.
	if rec := ts.Do("GET", "/healthz", ts.Admin, ""); rec.Code != http.StatusOK || rec.Body.String() != "ok\n" {
		t.Errorf("healthz: %d %q", rec.Code, rec.Body)
	}
	if rec := ts.Do("GET", "/v1/jobs", ts.Admin, ""); rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		t.Errorf("list jobs: %d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
}
