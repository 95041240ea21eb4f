package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"syscall"

	"github.com/sluice-dtn/sluice/auth"
	"github.com/sluice-dtn/sluice/backend"
)

// Error kinds of the protocol.
const (
	kindNotFound     = "not_found"
	kindPermission   = "permission"
	kindUnauthorized = "unauthorized"
	kindNoSpace      = "no_space"
	kindInvalid      = "invalid"
	kindExist        = "exist"
	kindFenced       = "fenced"
	kindChanged      = "changed"
	kindInternal     = "internal"
)

// statusError is an error with the status and kind to answer it with,
// for refusals that no backend sentinel describes.
type statusError struct {
	status int
	kind   string
	err    error
}

func (e *statusError) Error() string { return e.err.Error() }
func (e *statusError) Unwrap() error { return e.err }

func unauthorized(err error) error {
	return &statusError{http.StatusUnauthorized, kindUnauthorized, err}
}

// classify gives the status and kind that answer err.
func classify(err error) (int, string) {
	var se *statusError
	switch {
	case errors.As(err, &se):
		return se.status, se.kind
	case errors.Is(err, auth.ErrScope), errors.Is(err, auth.ErrPrefix):
		return http.StatusForbidden, kindPermission
	case errors.Is(err, backend.ErrNotFound):
		return http.StatusNotFound, kindNotFound
	case errors.Is(err, backend.ErrPermission):
		return http.StatusForbidden, kindPermission
	case errors.Is(err, backend.ErrNoSpace):
		return http.StatusInsufficientStorage, kindNoSpace
	case errors.Is(err, backend.ErrInvalid):
		return http.StatusBadRequest, kindInvalid
	case errors.Is(err, backend.ErrExist):
		return http.StatusConflict, kindExist
	case errors.Is(err, backend.ErrFenced):
		return http.StatusConflict, kindFenced
	case errors.Is(err, backend.ErrChanged):
		return http.StatusConflict, kindChanged
	// Errors backend/file leaves unclassified that are the request's
	// fault, not the server's: retrying them cannot help. POSIX lets
	// rmdir of a non-empty directory fail with EEXIST, hence exist.
	case errors.Is(err, syscall.ENOTEMPTY):
		return http.StatusConflict, kindExist
	case errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EISDIR):
		return http.StatusBadRequest, kindInvalid
	}
	return http.StatusInternalServerError, kindInternal
}

// statusKind is the kind for a status set by code that is not ours
// (net/http's mux and ServeContent).
func statusKind(status int) string {
	switch status {
	case http.StatusNotFound:
		return kindNotFound
	case http.StatusForbidden:
		return kindPermission
	case http.StatusUnauthorized:
		return kindUnauthorized
	case http.StatusInsufficientStorage:
		return kindNoSpace
	case http.StatusConflict:
		return kindExist
	}
	if status < 500 {
		return kindInvalid
	}
	return kindInternal
}

type errorBody struct {
	Error string `json:"error"`
	Kind  string `json:"kind"`
}

func writeJSONError(w http.ResponseWriter, status int, kind, msg string) {
	js, _ := json.Marshal(errorBody{msg, kind})
	h := w.Header()
	h.Del("Content-Length")
	h.Del("Content-Encoding")
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(append(js, '\n'))
}

// jsonErrors makes every error response JSON, as the protocol promises,
// including those net/http writes as text (the mux's 404 and 405,
// ServeContent's 416). Those are held back, their text kept, and rewritten
// by finish. Everything else passes straight through, including ReadFrom,
// so GET still reaches sendfile.
type jsonErrors struct {
	http.ResponseWriter
	status int          // a held-back error status, 0 if none
	text   bytes.Buffer // what its writer said, up to a bound
}

func (w *jsonErrors) WriteHeader(status int) {
	if w.status != 0 {
		return
	}
	if status >= 400 && !strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") {
		w.status = status
		return
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *jsonErrors) Write(p []byte) (int, error) {
	if w.status != 0 {
		if w.text.Len() < 512 {
			w.text.Write(p)
		}
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

// ReadFrom keeps net/http's sendfile path when the response is not held.
func (w *jsonErrors) ReadFrom(r io.Reader) (int64, error) {
	if w.status != 0 {
		return io.Copy(struct{ io.Writer }{w}, r)
	}
	if rf, ok := w.ResponseWriter.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(w.ResponseWriter, r)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *jsonErrors) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *jsonErrors) Flush() {
	if w.status == 0 {
		http.NewResponseController(w.ResponseWriter).Flush()
	}
}

// finish writes a held-back error as JSON.
func (w *jsonErrors) finish() {
	if w.status == 0 {
		return
	}
	msg := strings.TrimSpace(w.text.String())
	if msg == "" || len(msg) > 500 {
		msg = http.StatusText(w.status)
	}
	writeJSONError(w.ResponseWriter, w.status, statusKind(w.status), msg)
}
