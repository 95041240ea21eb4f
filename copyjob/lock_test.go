//go:build unix

package copyjob

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestLock: a second run of the same copy is refused at once, naming the
// first's process, until the first ends; copies of other sources or to
// another destination do not contend.
func TestLock(t *testing.T) {
	dir := t.TempDir()
	ep := func(u string) Endpoint { return Endpoint{URL: u} }
	a, b := []Endpoint{ep("file:///data/a")}, []Endpoint{ep("file:///data/b")}
	dst := ep("sluice://dtn:7000/in/")
	release, err := Lock(dir, a, dst)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Lock(dir, a, dst)
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "process "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second run of one copy: %v, want ErrBusy naming this process", err)
	}
	for _, tc := range []struct {
		name string
		srcs []Endpoint
		dst  Endpoint
	}{{"other source", b, dst}, {"other destination", a, ep("sluice://dtn:7000/other/")}, {"more sources", append(a, b...), dst}} {
		r, err := Lock(dir, tc.srcs, tc.dst)
		if err != nil {
			t.Errorf("%s: %v, want no contention", tc.name, err)
			continue
		}
		r()
	}
	release()
	r, err := Lock(dir, a, dst)
	if err != nil {
		t.Fatalf("after the first run ended: %v", err)
	}
	r()
}
