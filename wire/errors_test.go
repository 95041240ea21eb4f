package wire

import (
	"strings"
	"testing"
)

func TestValidName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"alice", true},
		{"dtn-1.example_org@cms", true},
		{strings.Repeat("a", 64), true},
		{"", false},
		{".", false},
		{"..", false},
		{"a/b", false}, // a name stands in paths
		{"a b", false},
		{"{user}", false},
		{strings.Repeat("a", 65), false},
		{"é", false},
	} {
		if got := ValidName(tc.name); got != tc.ok {
			t.Errorf("ValidName(%q) = %v, want %v", tc.name, got, tc.ok)
		}
	}
}
