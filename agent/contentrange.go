package agent

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// parseContentRange parses a PUT's Content-Range header, "bytes a-b/*" or
// "bytes a-b/SIZE" (RFC 9110 §14.4), strictly: no spaces, signs or other
// units, b >= a, SIZE > b. It returns the offset, the length b-a+1 and
// SIZE (-1 for *). The header comes from the network, so it never panics
// and never overflows.
func parseContentRange(h string) (off, n, size int64, err error) {
	bad := func(why string) (int64, int64, int64, error) {
		return 0, 0, 0, fmt.Errorf("Content-Range %.80q: %s (want bytes FIRST-LAST/* or bytes FIRST-LAST/SIZE)", h, why)
	}
	rest, ok := strings.CutPrefix(h, "bytes ")
	if !ok {
		return bad("not a byte range")
	}
	rng, total, ok := strings.Cut(rest, "/")
	if !ok {
		return bad("no /SIZE")
	}
	first, last, ok := strings.Cut(rng, "-")
	if !ok {
		return bad("no FIRST-LAST")
	}
	a, err1 := parseUint(first)
	b, err2 := parseUint(last)
	if err1 != nil || err2 != nil {
		return bad("FIRST and LAST must be decimal byte offsets")
	}
	if b < a {
		return bad("LAST is before FIRST")
	}
	if b == math.MaxInt64 {
		return bad("range too large")
	}
	size = -1
	if total != "*" {
		if size, err = parseUint(total); err != nil {
			return bad("SIZE must be * or a decimal size")
		}
		if size <= b {
			return bad("the range ends beyond SIZE")
		}
	}
	return a, b - a + 1, size, nil
}

// parseUint parses a non-negative decimal int64: digits only, unlike
// strconv.ParseInt, which also takes a sign.
func parseUint(s string) (int64, error) {
	if s == "" || len(s) > 19 {
		return 0, errors.New("not a decimal offset")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, errors.New("not a decimal offset")
		}
	}
	return strconv.ParseInt(s, 10, 64)
}
