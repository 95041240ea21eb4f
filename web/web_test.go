package web

import (
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The page's weight: every embedded file gzipped must total under 300 kB.
func TestPageWeight(t *testing.T) {
	const limit = 300_000
	total := 0
	err := fs.WalkDir(Static(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(Static(), p)
		if err != nil {
			return err
		}
		var z bytes.Buffer
		w, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
		w.Write(b)
		w.Close()
		t.Logf("%-20s %7d bytes, %6d gzipped", p, len(b), z.Len())
		total += z.Len()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("total %d bytes gzipped (limit %d)", total, limit)
	if total >= limit {
		t.Fatalf("the dashboard weighs %d bytes gzipped, over %d", total, limit)
	}
}

func TestHandler(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", Handler())
	mux.Handle("GET /ui/", Handler())
	mux.Handle("GET /docs", Docs())
	mux.Handle("GET /docs/", Docs())
	h := mux
	for _, c := range []struct {
		path, ctype, contains string
		status                int
	}{
		{"/docs", "text/html", "<title>Sluice API reference</title>", 200},
		{"/docs/", "text/html", "swagger-ui-bundle.js", 200},
		{"/docs/docs.js", "javascript", "/openapi.json", 200},
		{"/docs/swagger-ui-bundle.js", "javascript", "SwaggerUIBundle", 200},
		{"/docs/swagger-ui.css", "text/css", ".swagger-ui", 200},
		{"/docs/nope.js", "", "", 404},
		{"/", "text/html", "<title>Sluice dashboard</title>", 200},
		{"/ui/", "text/html", "API token", 200},
		{"/ui/app.js", "javascript", "sluiceDashboard", 200},
		{"/ui/app.css", "text/css", "--accent", 200},
		{"/ui/uPlot.iife.min.js", "javascript", "uPlot", 200},
		{"/ui/uPlot.min.css", "text/css", ".uplot", 200},
		{"/ui/nope.js", "", "", 404},
		{"/other", "", "", 404},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, c.path, nil))
		if rec.Code != c.status {
			t.Errorf("%s: status %d, want %d", c.path, rec.Code, c.status)
			continue
		}
		if c.status != 200 {
			continue
		}
		if ct := rec.Header().Get("Content-Type"); !strings.Contains(ct, c.ctype) {
			t.Errorf("%s: Content-Type %q, want %q", c.path, ct, c.ctype)
		}
		if !strings.Contains(rec.Body.String(), c.contains) {
			t.Errorf("%s: body lacks %q", c.path, c.contains)
		}
		if csp := rec.Header().Get("Content-Security-Policy"); strings.HasSuffix(c.ctype, "html") && !strings.Contains(csp, "default-src 'self'") {
			t.Errorf("%s: Content-Security-Policy %q", c.path, csp)
		}
		// Revalidation by ETag.
		req := httptest.NewRequest(http.MethodGet, c.path, nil)
		req.Header.Set("If-None-Match", rec.Header().Get("ETag"))
		rec2 := httptest.NewRecorder()
		h.ServeHTTP(rec2, req)
		if rec2.Code != http.StatusNotModified {
			t.Errorf("%s with its ETag: status %d, want 304", c.path, rec2.Code)
		}
	}
}

// A large asset goes gzipped to a client that takes it, as it is to one
// that does not.
func TestGzip(t *testing.T) {
	h := Docs()
	plain := httptest.NewRecorder()
	h.ServeHTTP(plain, httptest.NewRequest(http.MethodGet, "/docs/swagger-ui-bundle.js", nil))
	req := httptest.NewRequest(http.MethodGet, "/docs/swagger-ui-bundle.js", nil)
	req.Header.Set("Accept-Encoding", "gzip, deflate, br")
	zipped := httptest.NewRecorder()
	h.ServeHTTP(zipped, req)
	if zipped.Header().Get("Content-Encoding") != "gzip" || plain.Header().Get("Content-Encoding") != "" {
		t.Fatalf("Content-Encoding %q with gzip accepted, %q without", zipped.Header().Get("Content-Encoding"), plain.Header().Get("Content-Encoding"))
	}
	if zipped.Header().Get("ETag") == plain.Header().Get("ETag") {
		t.Error("the gzipped body has the plain one's ETag")
	}
	zr, err := gzip.NewReader(zipped.Body)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, plain.Body.Bytes()) || zipped.Body.Len() >= len(b)/2 {
		t.Errorf("gzipped %d bytes to %d; unzipped equal: %v", len(b), zipped.Body.Len(), bytes.Equal(b, plain.Body.Bytes()))
	}
}

// No file refers to another origin: the pages work offline.
func TestNoCDN(t *testing.T) {
	for _, f := range []struct {
		fsys fs.FS
		name string
	}{{Static(), "index.html"}, {Static(), "app.js"}, {Static(), "app.css"}, {DocsFiles(), "index.html"}, {DocsFiles(), "docs.css"}} {
		name := f.name
		b, err := fs.ReadFile(f.fsys, name)
		if err != nil {
			t.Fatal(err)
		}
		for _, bad := range []string{"src=\"http", "href=\"http", "@import", "cdn"} {
			if strings.Contains(strings.ToLower(string(b)), bad) {
				t.Errorf("%s contains %q", name, bad)
			}
		}
	}
	// Swagger UI sends the document to validator.swagger.io for a badge
	// unless told not to.
	b, err := fs.ReadFile(DocsFiles(), "docs.js")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "validatorUrl: null") {
		t.Error("docs.js does not turn Swagger UI's validator off (validatorUrl: null)")
	}
}

// A job's page lists its files a page at a time, with links to the other
// pages: it is redrawn twice a second while the job runs, and with a
// thousand rows (the page it asked for) a job of 100,000 files kept the
// browser's main thread busy 74% of the time, in tasks of up to 0.6 s,
// and its files past the thousandth could not be seen.
func TestJobFilesPaged(t *testing.T) {
	b, err := fs.ReadFile(Static(), "app.js")
	if err != nil {
		t.Fatal(err)
	}
	js := string(b)
	m := regexp.MustCompile(`const FILES_PAGE = (\d+);`).FindStringSubmatch(js)
	if m == nil {
		t.Fatal("app.js has no FILES_PAGE")
	}
	if n, _ := strconv.Atoi(m[1]); n < 1 || n > 200 {
		t.Errorf("FILES_PAGE is %d: want 1 to 200 rows a page", n)
	}
	reqs := regexp.MustCompile(`/files\?[^"'`+"`"+`]*`).FindAllString(js, -1)
	if len(reqs) == 0 {
		t.Fatal("app.js lists no files")
	}
	for _, r := range reqs {
		if !strings.Contains(r, "from=${from}") || !strings.Contains(r, "limit=${FILES_PAGE}") {
			t.Errorf("app.js asks for %q: want from=${from}&limit=${FILES_PAGE}", r)
		}
	}
	for _, want := range []string{`href="#/jobs/${j.id}/${d.from + d.files.length}"`, `href="#/jobs/${j.id}/${Math.max(0, d.from - FILES_PAGE)}"`} {
		if !strings.Contains(js, want) {
			t.Errorf("app.js lacks the page link %s", want)
		}
	}
}
