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
	v := buildVersion()
	var b strings.Builder
	fmt.Fprintf(&b, "sluice %s", v.Version)
	if v.Commit != "" {
		fmt.Fprintf(&b, " commit %.12s", v.Commit)
		if v.Modified {
			b.WriteString(" (modified)")
		}
	}
	if v.Go != "" {
		fmt.Fprintf(&b, ", %s", v.Go)
	}
	fmt.Fprintf(&b, ", agent protocol %s", v.AgentProtocol)
	return b.String()
}

// versionOut is the build, as `sluice version --json` prints it.
type versionOut struct {
	Version       string `json:"version"`
	Commit        string `json:"commit,omitempty"`
	Modified      bool   `json:"modified,omitempty"`
	Go            string `json:"go,omitempty"`
	AgentProtocol string `json:"agent_protocol"`
}

func buildVersion() versionOut {
	v := versionOut{Version: "(unknown)", AgentProtocol: agent.Version}
	if bi, ok := debug.ReadBuildInfo(); ok {
		v.Version, v.Go = bi.Main.Version, bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Commit = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	return v
}

func newVersionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version of this binary",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), buildVersion())
			}
			fmt.Fprintln(cmd.OutOrStdout(), versionLine())
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
