package main

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestCpPolicyDefaultCi: --ci's default (4) follows a smaller --cmax, as
// an adaptive job's ci does (server.AdaptiveSpec): `--cmax 2` alone is a
// valid client starting at 2 files. Before, it was refused with "initial
// concurrency 4: want 1..2", about a flag the user never gave. A --ci
// given above --cmax is still refused.
func TestCpPolicyDefaultCi(t *testing.T) {
	for _, c := range []struct {
		args    []string
		ci      int
		wantErr string
	}{
		{[]string{"--cmax", "2"}, 2, ""},
		{[]string{"--cmax", "1"}, 1, ""},
		{[]string{"--cmax", "16"}, 4, ""},
		{nil, 4, ""},
		{[]string{"--cmax", "2", "--ci", "3"}, 0, "initial concurrency 3"},
		{[]string{"--cmax", "0"}, 0, "max concurrency 0"},
		{[]string{"--cmax", "2", "--follow-allocation"}, 0, ""},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			var p cpPolicyFlags
			fl := pflag.NewFlagSet("cp", pflag.ContinueOnError)
			fl.Int("cc", 8, "")
			p.register(fl)
			if err := fl.Parse(append([]string{"--policy-server", "http://x"}, c.args...)); err != nil {
				t.Fatal(err)
			}
			if err := p.check(fl); err != nil {
				t.Fatal(err)
			}
			prm := p.params(4)
			err := prm.Validate()
			switch {
			case c.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Errorf("params %+v: %v, want an error about %q", prm, err, c.wantErr)
				}
			case err != nil:
				t.Errorf("params %+v: %v", prm, err)
			case c.ci > 0 && prm.Ci != c.ci:
				t.Errorf("ci %d, want %d", prm.Ci, c.ci)
			}
		})
	}
}
