// Package web owns the dashboard of `sluice serve`: a single page of
// plain JavaScript (no build step) that signs in with an API token and
// shows the endpoints' live throughput and concurrency, the caller's jobs
// (an admin's: all jobs) with their files, and the Policy Service's
// allocations. It reads the same REST API and server-sent event stream
// as the CLI; it holds no state on the server.
//
// The files are embedded (go:embed), including the chart library uPlot
// (MIT, committed minified; see static/LICENSE.uPlot), so the dashboard
// works offline and without a CDN. Handler serves the page at / and its
// assets under /ui/.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed static
var files embed.FS

// Static is the dashboard's files (index.html, app.js, app.css, uPlot).
func Static() fs.FS {
	sub, err := fs.Sub(files, "static")
	if err != nil {
		panic(err)
	}
	return sub
}

type asset struct {
	body  []byte
	etag  string
	ctype string
}

// Handler serves the dashboard: GET / is the page, GET /ui/NAME its
// assets. Mount it at "GET /{$}" and "GET /ui/".
func Handler() http.Handler {
	assets := map[string]asset{}
	st := Static()
	err := fs.WalkDir(st, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(st, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		ct := mime.TypeByExtension(path.Ext(p))
		if ct == "" {
			ct = "text/plain; charset=utf-8"
		}
		assets[p] = asset{body: b, etag: `"` + hex.EncodeToString(sum[:8]) + `"`, ctype: ct}
		return nil
	})
	if err != nil {
		panic(err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := "index.html"
		if r.URL.Path != "/" {
			rest, ok := strings.CutPrefix(r.URL.Path, "/ui/")
			if !ok {
				http.NotFound(w, r)
				return
			}
			if rest != "" {
				name = rest
			}
		}
		a, ok := assets[name]
		if !ok {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Type", a.ctype)
		h.Set("ETag", a.etag)
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		if name == "index.html" {
			h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
		}
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(a.body))
	})
}
