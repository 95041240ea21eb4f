package agent

import (
	"net/http"
	"strconv"
	"strings"
)

// fixRange rewrites a GET's Range header (RFC 9110 §14.2) where
// http.ServeContent, which answers it, gets it wrong, and leaves the rest
// (If-Range, HEAD, conditional requests, 206, 416) to ServeContent:
//
//   - A zero-length suffix range ("bytes=-0") selects nothing: unlike any
//     other range it is unsatisfiable on every file. ServeContent answered
//     it 206 with an invalid Content-Range ("bytes 5-4/5"), and put it in
//     multipart answers as a bogus part. Such ranges are dropped; a set of
//     nothing else becomes one that begins at the end of the file, which
//     ServeContent answers 416 with "Content-Range: bytes */SIZE".
//   - On an empty file no 206 can be written (there is no first or last
//     byte): ServeContent answered a suffix range 206 "bytes 0--1/0". Any
//     Range on an empty file is ignored, answered 200 with the (empty)
//     file, as ServeContent itself does for "bytes=0-0" there (RFC 9110
//     lets a server ignore Range).
//   - Offsets too large for int64 are valid syntax: a last offset beyond
//     the file means its end, a suffix that long the whole file, a first
//     offset that large lies beyond the file. ServeContent refused them as
//     invalid.
//   - A range unit other than bytes must be ignored (RFC 9110 §14.2);
//     ServeContent answered 416.
//
// size is the file's size.
func fixRange(r *http.Request, size int64) {
	h := r.Header.Get("Range")
	if h == "" {
		return
	}
	unit, set, ok := strings.Cut(h, "=")
	if !ok {
		return // not a ranges-specifier: ServeContent answers 416
	}
	if !strings.EqualFold(strings.TrimSpace(unit), "bytes") {
		r.Header.Del("Range")
		return
	}
	if size == 0 {
		r.Header.Del("Range")
		return
	}
	var keep []string
	dropped := false
	for _, spec := range strings.Split(set, ",") {
		spec = strings.Trim(spec, " \t")
		first, last, ok := strings.Cut(spec, "-")
		if !ok || !digits(first) && first != "" || !digits(last) && last != "" || first == "" && last == "" {
			keep = append(keep, spec) // invalid: ServeContent says so
			continue
		}
		switch {
		case first == "" && strings.Trim(last, "0") == "":
			dropped = true // -0: selects nothing
			continue
		case first == "" && tooLarge(last):
			spec = "0-" // a suffix longer than any file: all of it
		case first != "" && tooLarge(first):
			dropped = true // begins beyond any file
			continue
		case last != "" && tooLarge(last):
			spec = first + "-" // to the end
		}
		keep = append(keep, spec)
	}
	if len(keep) == 0 && dropped {
		keep = []string{strconv.FormatInt(size, 10) + "-"} // unsatisfiable: 416 bytes */SIZE
	}
	r.Header.Set("Range", "bytes="+strings.Join(keep, ","))
}

// digits reports whether s is one or more ASCII digits.
func digits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// tooLarge reports whether the decimal digits s exceed int64.
func tooLarge(s string) bool {
	_, err := strconv.ParseInt(s, 10, 64)
	return err != nil
}
