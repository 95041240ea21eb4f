package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/danielgtaylor/huma/v2"
)

// problemAnswers makes the answers that the mux and plain handlers give
// as text problem documents (RFC 9457, application/problem+json), as the
// API's own errors are, so that a client reads one kind of error: the
// mux's 404 for an unknown path, its 405 for a method a path does not
// take (with Allow), its redirects of unclean paths (/v1//jobs,
// /v1/./jobs; with Location, so clients that follow them still do), and
// any http.Error. Answers that are JSON already, and those that are not
// errors or redirects, pass through untouched (event streams included:
// the writer flushes and unwraps).
func problemAnswers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pw := &problemWriter{ResponseWriter: w, r: r}
		next.ServeHTTP(pw, r)
		pw.finish()
	})
}

// maxProblemText bounds the text of a converted answer kept as detail.
const maxProblemText = 1024

// problemWriter converts a text error or redirect to a problem document.
type problemWriter struct {
	http.ResponseWriter
	r      *http.Request
	status int          // 0 until the header is written
	held   bool         // converting: the header and body are held for finish
	text   bytes.Buffer // the held body (up to maxProblemText)
}

func (p *problemWriter) WriteHeader(code int) {
	if p.status != 0 {
		return // superfluous, as net/http has it
	}
	if code < 200 {
		p.ResponseWriter.WriteHeader(code) // informational: more follows
		return
	}
	p.status = code
	ct := p.Header().Get("Content-Type")
	redirect := code == http.StatusMovedPermanently || code == http.StatusFound || code == http.StatusSeeOther ||
		code == http.StatusTemporaryRedirect || code == http.StatusPermanentRedirect
	if (code < 400 && !redirect) || (ct != "" && !strings.HasPrefix(ct, "text/")) {
		p.ResponseWriter.WriteHeader(code)
		return
	}
	p.held = true
}

func (p *problemWriter) Write(b []byte) (int, error) {
	if p.status == 0 {
		p.WriteHeader(http.StatusOK)
	}
	if p.held {
		if room := maxProblemText - p.text.Len(); room > 0 {
			p.text.Write(b[:min(len(b), room)])
		}
		return len(b), nil
	}
	return p.ResponseWriter.Write(b)
}

// Flush flushes what is not held (event streams).
func (p *problemWriter) Flush() {
	if p.held {
		return
	}
	if f, ok := p.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (p *problemWriter) Unwrap() http.ResponseWriter { return p.ResponseWriter }

// finish writes a held answer as a problem document.
func (p *problemWriter) finish() {
	if !p.held {
		return
	}
	h := p.Header()
	code := p.status
	detail := strings.TrimSpace(p.text.String())
	switch {
	case code == http.StatusNotFound:
		detail = fmt.Sprintf("no such path: %s (the API is under /v1, described at /openapi.json)", p.r.URL.Path)
	case code == http.StatusMethodNotAllowed:
		detail = fmt.Sprintf("%s is not allowed on %s; allowed: %s", p.r.Method, p.r.URL.Path, h.Get("Allow"))
	case code < 400:
		detail = fmt.Sprintf("%s is not in canonical form: the resource is at %s", p.r.URL.EscapedPath(), h.Get("Location"))
	case detail == "":
		detail = http.StatusText(code)
	}
	h.Del("Content-Length")
	h.Set("Content-Type", "application/problem+json")
	p.ResponseWriter.WriteHeader(code)
	_ = json.NewEncoder(p.ResponseWriter).Encode(&huma.ErrorModel{Title: http.StatusText(code), Status: code, Detail: detail})
}
