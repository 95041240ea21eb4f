package agent

import (
	"strings"
	"testing"
)

// TestGetRanges: GET answers every Range as RFC 9110 §14 has it, never
// with an invalid Content-Range. Before, "bytes=-0" (a suffix of no
// bytes: unsatisfiable) was answered 206 "bytes 5-4/5", a suffix range on
// an empty file 206 "bytes 0--1/0", offsets past int64 416 as invalid,
// and an unknown range unit 416 instead of being ignored.
func TestGetRanges(t *testing.T) {
	e := newEnv(t, "a", nil)
	e.write("f", "hello")
	e.write("empty", "")
	tok := e.token("read", "/")
	for _, tc := range []struct {
		file, rng string
		status    int
		cr, body  string // cr: Content-Range, or - for a multipart answer
		ifRange   string
	}{
		{"f", "bytes=-0", 416, "bytes */5", "", ""},
		{"f", "bytes=-000", 416, "bytes */5", "", ""},
		{"f", "bytes=-0,-0", 416, "bytes */5", "", ""},
		{"f", "bytes=0-0,-0", 206, "bytes 0-0/5", "h", ""},
		{"f", "bytes=-0, 1-2", 206, "bytes 1-2/5", "el", ""},
		{"f", "bytes=5-", 416, "bytes */5", "", ""},
		{"f", "bytes=10-20", 416, "bytes */5", "", ""},
		{"f", "bytes=4-", 206, "bytes 4-4/5", "o", ""},
		{"f", "bytes=0-0", 206, "bytes 0-0/5", "h", ""},
		{"f", "bytes=-2", 206, "bytes 3-4/5", "lo", ""},
		{"f", "bytes=-10", 206, "bytes 0-4/5", "hello", ""},
		{"f", "bytes=0-99999999999999999999", 206, "bytes 0-4/5", "hello", ""},
		{"f", "bytes=-99999999999999999999", 206, "bytes 0-4/5", "hello", ""},
		{"f", "bytes=99999999999999999999-", 416, "bytes */5", "", ""},
		{"f", "bytes=0-0,2-3", 206, "-", "", ""},
		{"f", "bytes=3-1", 416, "", "", ""},
		{"f", "bytes=abc", 416, "", "", ""},
		{"f", "items=0-1", 200, "", "hello", ""},
		// If-Range that does not match: the range is ignored, -0 too.
		{"f", "bytes=-0", 200, "", "hello", "Mon, 01 Jan 2001 00:00:00 GMT"},
		// Empty file: no 206 can describe it; every range is ignored.
		{"empty", "bytes=-0", 200, "", "", ""},
		{"empty", "bytes=-5", 200, "", "", ""},
		{"empty", "bytes=0-0", 200, "", "", ""},
		{"empty", "bytes=0-", 200, "", "", ""},
	} {
		t.Run(tc.file+" "+tc.rng+" "+tc.ifRange, func(t *testing.T) {
			hdr := map[string]string{"Range": tc.rng}
			if tc.ifRange != "" {
				hdr["If-Range"] = tc.ifRange
			}
			got := e.raw("GET", "/v1/files/"+tc.file, tok, hdr, "")
			cr := got.header.Get("Content-Range")
			if tc.cr == "-" {
				if got.status != 206 || !strings.HasPrefix(got.header.Get("Content-Type"), "multipart/byteranges") || strings.Count(got.body, "Content-Range: bytes ") != 2 {
					t.Errorf("%d %q %q, want 206 multipart/byteranges of two parts", got.status, got.header.Get("Content-Type"), got.body)
				}
				return
			}
			if got.status != tc.status || cr != tc.cr || got.status != 416 && got.body != tc.body {
				t.Errorf("%d Content-Range %q body %q, want %d %q %q", got.status, cr, got.body, tc.status, tc.cr, tc.body)
			}
		})
	}
}
