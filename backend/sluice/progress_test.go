package sluice

import (
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-dtn/sluice/backend"
)

// TestReadPullProgress: how a pull's progress report is read. An error
// that came after bytes were reported keeps its kind; a report that ends
// without saying done, claims more than was asked, goes backwards or says
// done short of the length is an error, never a success.
func TestReadPullProgress(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		ctype  string
		body   string
		want   error // nil: success
		seen   []int64
	}{
		{"no content", 204, "", "", nil, nil},
		{"report", 200, PullProgressType, `{"written":4}` + "\n" + `{"written":8}` + "\n" + `{"written":10,"done":true}` + "\n", nil, []int64{4, 8, 10}},
		{"error after bytes", 200, PullProgressType, `{"written":4}` + "\n" + `{"written":4,"error":"disk full","kind":"no_space"}` + "\n", backend.ErrNoSpace, []int64{4}},
		{"unknown kind", 200, PullProgressType, `{"written":0,"error":"odd","kind":"martian"}` + "\n", errAny, nil},
		{"cut short", 200, PullProgressType, `{"written":4}` + "\n", io.ErrUnexpectedEOF, []int64{4}},
		{"more than asked", 200, PullProgressType, `{"written":11}` + "\n", errAny, nil},
		{"backwards", 200, PullProgressType, `{"written":6}` + "\n" + `{"written":5}` + "\n", errAny, []int64{6}},
		{"done short", 200, PullProgressType, `{"written":9,"done":true}` + "\n", errAny, nil},
		{"not JSON", 200, PullProgressType, "<html>", errAny, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := &http.Response{StatusCode: tc.status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(tc.body))}
			if tc.ctype != "" {
				resp.Header.Set("Content-Type", tc.ctype)
			}
			var seen []int64
			err := readPullProgress(resp, 10, func(w int64) { seen = append(seen, w) })
			switch {
			case tc.want == nil && err != nil:
				t.Errorf("error %v, want success", err)
			case tc.want != nil && err == nil:
				t.Errorf("success, want an error")
			case tc.want != nil && tc.want != errAny && !errors.Is(err, tc.want):
				t.Errorf("error %v, want %v", err, tc.want)
			}
			if !slices.Equal(seen, tc.seen) {
				t.Errorf("progress %v, want %v", seen, tc.seen)
			}
		})
	}
}

// errAny: any error will do.
var errAny = errors.New("any error")
