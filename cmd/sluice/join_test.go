package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSecretArg: a token flag's @FILE is read, with ~ meaning the home
// directory as the shell would expand it at the start of a word
// (--token @~/admin.token reaches sluice with its ~ untouched).
func TestSecretArg(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	if err := os.WriteFile(filepath.Join(home, "tok"), []byte("sk_home\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "tok")
	if err := os.WriteFile(other, []byte("  sk_abs  \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		arg, want, err string
	}{
		{"sk_plain", "sk_plain", ""},
		{"@~/tok", "sk_home", ""},
		{"@" + other, "sk_abs", ""},
		{"~/tok", "~/tok", ""}, // a value, not a file: only @ reads one
		{"@~/missing", "", filepath.Join(home, "missing")},
		{"@~", "", "is a directory"},
		{"@~nobody/tok", "", "~nobody/tok"}, // ~user is not expanded
	} {
		t.Run(tc.arg, func(t *testing.T) {
			got, err := secretArg(tc.arg)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("secretArg(%q): %v", tc.arg, err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("secretArg(%q): error %v, want one naming %q", tc.arg, err, tc.err)
			case got != tc.want:
				t.Errorf("secretArg(%q) = %q, want %q", tc.arg, got, tc.want)
			}
		})
	}
}
