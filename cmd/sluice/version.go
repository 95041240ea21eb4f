package main

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluice-dtn/sluice/agent"
)

// versionLine says which build this is: the module's version (a
// release's tag, "(devel)" for a build from a work tree), the commit and
// whether the tree had changes, the Go version, and the agent protocol's
// version, as `go build` recorded them.
func versionLine() string {
	v, commit, dirty, goVersion := "(unknown)", "", false, ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		v, goVersion = bi.Main.Version, bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "sluice %s", v)
	if commit != "" {
		fmt.Fprintf(&b, " commit %.12s", commit)
		if dirty {
			b.WriteString(" (modified)")
		}
	}
	if goVersion != "" {
		fmt.Fprintf(&b, ", %s", goVersion)
	}
	fmt.Fprintf(&b, ", agent protocol %s", agent.Version)
	return b.String()
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version of this binary",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), versionLine())
			return nil
		},
	}
}
