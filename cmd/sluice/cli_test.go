package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// walkCommands calls f with every command under root, subcommands after
// their parent, help and completion left out.
func walkCommands(root *cobra.Command, f func(*cobra.Command)) {
	for _, c := range root.Commands() {
		if c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		f(c)
		walkCommands(c, f)
	}
}

// noJSON are the commands without --json, and why.
var noJSON = map[string]string{
	"sluice serve":       "a service: it logs, and its API answers in JSON",
	"sluice agent":       "a service: it logs",
	"sluice testbed up":  "runs a service until stopped; it logs",
	"sluice net exec":    "prints what the command it runs prints",
	"sluice net forward": "the forwarder net up starts (hidden)",
	"sluice net set":     "prints nothing",
	"sluice net down":    "prints nothing",
	"sluice trace gen":   "prints the trace itself (csv or jsonl)",
}

// TestEveryCommandHasJSON: every command that prints something a script
// would read takes --json, the one flag for JSON across the CLI.
func TestEveryCommandHasJSON(t *testing.T) {
	walkCommands(newRoot(), func(c *cobra.Command) {
		if !c.Runnable() {
			return
		}
		_, exempt := noJSON[c.CommandPath()]
		has := c.Flags().Lookup("json") != nil
		switch {
		case !has && !exempt:
			t.Errorf("%s has no --json", c.CommandPath())
		case has && exempt:
			t.Errorf("%s has --json now: take it off the list of exceptions", c.CommandPath())
		}
	})
}

// TestJSONOutput: the commands that need no server print one JSON
// document on stdout with --json, with the fields documented.
func TestJSONOutput(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "token.key")
	if _, err := run(t, "keygen", key); err != nil {
		t.Fatal(err)
	}
	tr := filepath.Join(dir, "t.csv")
	if _, err := run(t, "trace", "gen", "--load", "0.1", "--minutes", "1", "--out", tr); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want []string // keys of the JSON object
	}{
		{[]string{"version", "--json"}, []string{"version", "agent_protocol"}},
		{[]string{"keygen", filepath.Join(dir, "other.key"), "--json"}, []string{"key_file"}},
		{[]string{"data-token", "--token-key", key, "--json"}, []string{"token", "scope", "prefix", "aud", "expires"}},
		{[]string{"ca", "init", "--dir", filepath.Join(dir, "ca"), "--json"}, []string{"cert", "key"}},
		{[]string{"ca", "issue", "--dir", filepath.Join(dir, "ca"), "--json", "localhost"}, []string{"cert", "key", "hosts", "valid_days"}},
		{[]string{"trace", "stats", tr, "--json"}, []string{"file", "transfers", "bytes", "classes", "read"}},
	} {
		t.Run(strings.Join(tc.args[:2], " "), func(t *testing.T) {
			out, errs, err := runSplit(t, tc.args...)
			if err != nil {
				t.Fatalf("%v: %v\n%s", tc.args, err, errs)
			}
			var got map[string]json.RawMessage
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("%v printed %q, not one JSON object: %v", tc.args, out, err)
			}
			for _, k := range tc.want {
				if _, ok := got[k]; !ok {
					t.Errorf("%v: no %q in %s", tc.args, k, out)
				}
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "other.key")); err != nil {
		t.Errorf("keygen --json wrote no key: %v", err)
	}
}
