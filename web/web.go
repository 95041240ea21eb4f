// Package web owns the dashboard of `sluice serve` and its API
// reference page: a single page of plain JavaScript (no build step) that
// signs in with an API token and is an operator's console (charts of
// throughput, queues and failures from the store's history, per endpoint
// and per link; recent failed files; the endpoints and their load; jobs
// with their files; a submit form with the estimate first; the Policy
// Service's allocations), and /docs, Swagger UI over /openapi.json. The
// dashboard reads the same REST API and server-sent event stream as the
// CLI; it holds no state on the server.
//
// Every file is embedded (go:embed), the chart library uPlot (MIT,
// committed minified; see static/LICENSE.uPlot) and Swagger UI (Apache
// 2.0; docs/LICENSE.swagger-ui) included, so that both pages work offline
// and without a CDN: DTNs are often air-gapped. Handler serves the
// dashboard at / and its assets under /ui/, Docs the reference at /docs
// and its assets under /docs/.
package web

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"
)

//go:embed static docs
var files embed.FS

func sub(dir string) fs.FS {
	sub, err := fs.Sub(files, dir)
	if err != nil {
		panic(err)
	}
	return sub
}

// Static is the dashboard's files (index.html, app.js, app.css, uPlot).
func Static() fs.FS { return sub("static") }

// DocsFiles is the API reference's files (index.html, docs.js, Swagger UI).
func DocsFiles() fs.FS { return sub("docs") }

// pageCSP is both pages' Content-Security-Policy: scripts, styles and
// requests from this origin only (a browser refuses anything else, so
// that neither page can reach a CDN or send a token elsewhere); inline
// styles and data: images, which uPlot and Swagger UI draw with.
const pageCSP = "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

type asset struct {
	body  []byte
	etag  string
	ctype string
	// gz is body gzipped, made at the first request that accepts it
	// (Swagger UI's bundle is 1.8 MB, 0.5 MB gzipped).
	gzOnce sync.Once
	gz     []byte
}

// gzipMin is the smallest asset served gzipped to a client that takes it.
const gzipMin = 16 << 10

func (a *asset) gzipped() []byte {
	a.gzOnce.Do(func() {
		var b bytes.Buffer
		w, _ := gzip.NewWriterLevel(&b, gzip.BestSpeed)
		w.Write(a.body)
		if w.Close() == nil && b.Len() < len(a.body) {
			a.gz = b.Bytes()
		}
	})
	return a.gz
}

// load reads every file of fsys.
func load(fsys fs.FS) map[string]*asset {
	assets := map[string]*asset{}
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		ct := mime.TypeByExtension(path.Ext(p))
		if ct == "" {
			ct = "text/plain; charset=utf-8"
		}
		assets[p] = &asset{body: b, etag: `"` + hex.EncodeToString(sum[:8]) + `"`, ctype: ct}
		return nil
	})
	if err != nil {
		panic(err)
	}
	return assets
}

// serve answers with asset a (its page's policy csp, if set).
func serve(w http.ResponseWriter, r *http.Request, name string, a *asset, csp string) {
	h := w.Header()
	h.Set("Content-Type", a.ctype)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Vary", "Accept-Encoding")
	if csp != "" {
		h.Set("Content-Security-Policy", csp)
	}
	body, etag := a.body, a.etag
	if len(a.body) >= gzipMin && strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		if gz := a.gzipped(); gz != nil {
			body, etag = gz, strings.TrimSuffix(a.etag, `"`)+`-gz"`
			h.Set("Content-Encoding", "gzip")
		}
	}
	h.Set("ETag", etag)
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(body))
}

// Handler serves the dashboard: GET / is the page, GET /ui/NAME its
// assets. Mount it at "GET /{$}" and "GET /ui/".
func Handler() http.Handler { return pages(Static(), "/", "/ui/") }

// Docs serves the API reference: GET /docs is the page (Swagger UI over
// /openapi.json), GET /docs/NAME its assets. Mount it at "GET /docs" and
// "GET /docs/".
func Docs() http.Handler { return pages(DocsFiles(), "/docs", "/docs/") }

// pages serves files: page (the path of index.html) and dir+NAME, with
// the page's content security policy on index.html.
func pages(files fs.FS, page, dir string) http.Handler {
	assets := load(files)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := "index.html"
		if r.URL.Path != page {
			rest, ok := strings.CutPrefix(r.URL.Path, dir)
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
		csp := ""
		if name == "index.html" {
			csp = pageCSP
		}
		serve(w, r, name, a, csp)
	})
}
