package agent

import (
	"slices"
	"testing"
)

// TestParseServers: every --server URL is checked at start. Before, only
// those join tried were: with the first server up, a bad URL later in
// the list was found by heartbeats failing over to it, which then ended
// for good, leaving the agent running but never heartbeating.
func TestParseServers(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string // nil: an error
	}{
		{"http://s1:8080", []string{"http://s1:8080"}},
		{"http://s1:8080, https://s2:8443,", []string{"http://s1:8080", "https://s2:8443"}},
		{"http://s1:8080,s2:8080", nil},
		{"http://s1:8080,ftp://s2", nil},
		{"http://s1:8080,http://", nil},
		{" , ", nil},
	} {
		got, err := ParseServers(tc.in)
		if tc.want == nil {
			if err == nil {
				t.Errorf("%q: %v, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%q: %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}
