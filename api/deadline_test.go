package api

import (
	"io"
	"strings"
	"testing"
)

// TestDeadlineLifter: the read deadline is lifted once, when the body
// ends, and not before: a body read in part keeps its deadline, which
// bounds a client that sends slowly.
func TestDeadlineLifter(t *testing.T) {
	lifts := 0
	d := &deadlineLifter{ReadCloser: io.NopCloser(strings.NewReader("0123456789")), lift: func() { lifts++ }}
	buf := make([]byte, 4)
	if _, err := d.Read(buf); err != nil || lifts != 0 {
		t.Fatalf("after part of the body: %v, %d lifts; want none", err, lifts)
	}
	if b, err := io.ReadAll(d); err != nil || string(b) != "456789" {
		t.Fatalf("rest of the body: %q, %v", b, err)
	}
	if _, err := d.Read(buf); err != io.EOF {
		t.Fatalf("read past the end: %v, want EOF", err)
	}
	if lifts != 1 {
		t.Errorf("%d lifts, want 1 (at the end of the body)", lifts)
	}
}
