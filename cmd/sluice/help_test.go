package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// maxHelpLines is the most lines a command's --help may print: a screen.
// The details belong in the guides (docs/).
const maxHelpLines = 35

// TestHelpIsShort: every command's --help fits on a screen. (cp --help
// was 93 lines.)
func TestHelpIsShort(t *testing.T) {
	n := 0
	root := newRoot()
	check := func(c *cobra.Command) {
		n++
		path := strings.Fields(c.CommandPath())[1:]
		out, errs, err := runSplit(t, append(path, "--help")...)
		if err != nil || errs != "" {
			t.Errorf("%s --help: %v %s", c.CommandPath(), err, errs)
			return
		}
		if lines := strings.Count(out, "\n"); lines > maxHelpLines {
			t.Errorf("%s --help is %d lines, more than %d: move details to the guides (moreFlags for flags few runs need)\n%s",
				c.CommandPath(), lines, maxHelpLines, out)
		}
	}
	check(root)
	walkCommands(root, check)
	if n < 50 {
		t.Errorf("looked at the help of %d commands; the tree has more", n)
	}
}

// TestMoreFlagsDocumented: a flag the help names without describing it is
// described in the guide the help points to.
func TestMoreFlagsDocumented(t *testing.T) {
	guides := map[string]string{}
	walkCommands(newRoot(), func(c *cobra.Command) {
		names, files := moreFlagsOf(c)
		if len(names) == 0 {
			return
		}
		var text strings.Builder
		for _, g := range files {
			if _, ok := guides[g]; !ok {
				b, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(g)))
				if err != nil {
					t.Errorf("%s: guide %s: %v", c.CommandPath(), g, err)
				}
				guides[g] = string(b)
			}
			text.WriteString(guides[g])
		}
		out, _, _ := runSplit(t, append(strings.Fields(c.CommandPath())[1:], "--help")...)
		for _, name := range names {
			if !containsFlag(text.String(), name) {
				t.Errorf("%s: %s is described in none of %v", c.CommandPath(), name, files)
			}
			if !containsFlag(out, name) {
				t.Errorf("%s --help does not name %s", c.CommandPath(), name)
			}
		}
	})
}

// containsFlag reports whether text names the flag (--name, not as the
// start of a longer one).
func containsFlag(text, flag string) bool {
	for i := 0; ; {
		j := strings.Index(text[i:], flag)
		if j < 0 {
			return false
		}
		end := i + j + len(flag)
		if end == len(text) || !strings.ContainsRune("abcdefghijklmnopqrstuvwxyz0123456789-", rune(text[end])) {
			return true
		}
		i = end
	}
}
