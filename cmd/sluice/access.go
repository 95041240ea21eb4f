package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sluice-dtn/sluice/server"
)

// newAccessCmd is `sluice access`: the rules that say which paths of which
// endpoints users' jobs may read and write (server/access.go).
func newAccessCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "access",
		Short: "Show or set which paths users' jobs may read and write",
		Long: `Jobs of users who are not admins may read a source and write a destination only
where an access rule allows it; with no rule, nowhere. A rule names an endpoint
(or *), a path prefix (whole elements; {user} and {vo} stand for the caller's
name and VO), who it is for (user, vo, or user "*" for everyone) and the access
(read, or write which includes read). Admins may use every path.`,
	}
	cmd.AddCommand(newAccessShowCmd(), newAccessSetCmd())
	return cmd
}

func newAccessShowCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show",
		Short: "List the access rules (yours, or all for an admin)",
		Args:  cobra.NoArgs,
	}
	cc := clientFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		cl, err := cc.client()
		if err != nil {
			return fmt.Errorf("access show: %w", err)
		}
		a, err := cl.Access(cmd.Context())
		if err != nil {
			return fmt.Errorf("access show: %w", err)
		}
		if asJSON {
			return writeJSON(cmd.OutOrStdout(), a)
		}
		if len(a.Rules) == 0 {
			fmt.Fprintln(cmd.OutOrStdout(), "no access rules: only admins' jobs may read or write files")
			return nil
		}
		tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ENDPOINT\tPATH\tUSER\tVO\tACCESS")
		for _, r := range a.Rules {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Endpoint, r.Path, dash(r.User), dash(r.VO), r.Access)
		}
		return tw.Flush()
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (the form access set reads)")
	return cmd
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newAccessSetCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "set FILE",
		Short: "Replace the access rules with those in FILE (JSON; - for stdin; admins)",
		Example: `  cat > access.json <<'END'
  {"rules": [
    {"endpoint": "*", "path": "/home/{user}", "user": "*", "access": "write"},
    {"endpoint": "dtn1", "path": "/data/{vo}", "vo": "*", "access": "read"}
  ]}
  END
  sluice access set access.json`,
		Args: cobra.ExactArgs(1),
	}
	cc := clientFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		var r io.Reader = cmd.InOrStdin()
		if args[0] != "-" {
			f, err := os.Open(args[0])
			if err != nil {
				return fmt.Errorf("access set: %w", err)
			}
			defer f.Close()
			r = f
		}
		dec := json.NewDecoder(io.LimitReader(r, 16<<20))
		dec.DisallowUnknownFields()
		var a server.AccessConfig
		if err := dec.Decode(&a); err != nil {
			return fmt.Errorf("access set: %s: %w", args[0], err)
		}
		cl, err := cc.client()
		if err != nil {
			return fmt.Errorf("access set: %w", err)
		}
		out, err := cl.SetAccess(cmd.Context(), a)
		if err != nil {
			return fmt.Errorf("access set: %w", err)
		}
		if asJSON {
			return writeJSON(cmd.OutOrStdout(), out)
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "%d access rules set\n", len(out.Rules))
		return nil
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the rules now in force as JSON")
	return cmd
}
