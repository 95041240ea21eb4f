package api

import (
	"io"
	"net/http"
	"time"
)

// bodyDeadlineEnds lifts the read deadline of a request's connection once
// its body has been read. huma bounds each operation's body read with a
// deadline on the connection (Operation.BodyReadTimeout, 5 s unless set)
// and leaves it there; net/http keeps reading the connection behind a
// running handler to notice a client that goes, and when that read meets
// the deadline it cancels the request's context. A handler still at work
// then (a job of 100,000 files written to a busy database, an estimate
// sampling a path) failed with "request interrupted: context canceled"
// although its client was waiting for the answer.
func bodyDeadlineEnds(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			rc := http.NewResponseController(w)
			// On a copy of the request: net/http looks at the type of
			// the original's Body after the handler, to tell a body
			// the handler closed unread (the connection is closed
			// after the answer) from one it left (the rest is read
			// first). Wrapping the original made every refusal before
			// the body (401 to a request without credentials) wait for
			// a body that may never come.
			r = r.WithContext(r.Context())
			r.Body = &deadlineLifter{ReadCloser: r.Body, lift: func() { _ = rc.SetReadDeadline(time.Time{}) }}
		}
		next.ServeHTTP(w, r)
	})
}

// deadlineLifter calls lift once, when its body ends.
type deadlineLifter struct {
	io.ReadCloser
	lift   func()
	lifted bool
}

func (d *deadlineLifter) Read(p []byte) (int, error) {
	n, err := d.ReadCloser.Read(p)
	if err == io.EOF && !d.lifted {
		d.lifted = true
		d.lift()
	}
	return n, err
}
