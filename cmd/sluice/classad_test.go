package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestSubmitClassAdJobFlags: the job flags of submit (--batch, --label,
// --optimize, ...) do not reach the jobs of a ClassAd file, whose ads say
// what each is: giving one is refused before anything is submitted, rather
// than submitting interactive, unlabelled, unoptimised jobs as if it had
// been taken.
func TestSubmitClassAdJobFlags(t *testing.T) {
	var mu sync.Mutex
	var calls []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls = append(calls, r.Method+" "+r.URL.Path)
		mu.Unlock()
		http.Error(w, "not here", http.StatusTeapot)
	}))
	defer srv.Close()
	ad := filepath.Join(t.TempDir(), "job.classad")
	if err := os.WriteFile(ad, []byte(`[ src_url = "gsiftp://a/x"; dest_url = "gsiftp://b/x"; ]`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, flags := range [][]string{
		{"--batch"}, {"--class", "batch"}, {"--label", "nightly"}, {"--optimize"}, {"--streams", "4"},
		{"--checksum", "md5"}, {"--submission-id", "k1"}, {"--watch"}, {"--selection", "bos"},
		{"--sources", "sluice://a/x,sluice://c/x"},
	} {
		t.Run(flags[0], func(t *testing.T) {
			mu.Lock()
			calls = nil
			mu.Unlock()
			_, err := run(t, append([]string{"submit", "--server", srv.URL, "--token", "t", "-f", ad}, flags...)...)
			if err == nil || !strings.Contains(err.Error(), flags[0]) {
				t.Errorf("submit -f job.classad %v: %v, want an error naming %s", flags, err, flags[0])
			}
			mu.Lock()
			defer mu.Unlock()
			if len(calls) > 0 {
				t.Errorf("the server was asked %v", calls)
			}
		})
	}
}
