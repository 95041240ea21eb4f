package main

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-dtn/sluice/pki"
)

// newCACmd is `sluice ca`: a certificate authority for sites without one
// (package pki), so that servers, agents and clients verify each other.
func newCACmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ca",
		Short: "A certificate authority for sites without one: TLS for servers and agents",
		Long: `sluice ca init makes an authority (ca.pem to give every client and agent,
ca.key to keep on the machine that issues); sluice ca issue signs a certificate
for a server or an agent by its host names and addresses. Servers serve it with
--tls-cert/--tls-key (renewed files are read again without a restart); clients
and agents trust the authority with --ca ca.pem (or SLUICE_CA).`,
	}
	var dir string
	var asJSON bool
	initCmd := &cobra.Command{
		Use:     "init",
		Short:   "Make a certificate authority in --dir",
		Example: `  sluice ca init --dir /etc/sluice/ca`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := pki.InitCA(dir, "", time.Now()); err != nil {
				return err
			}
			cert, key := filepath.Join(dir, pki.CACert), filepath.Join(dir, pki.CAKey)
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), caFilesOut{Cert: cert, Key: key})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "authority in %s: give %s to clients and agents (--ca), keep %s here\n", dir, cert, key)
			return nil
		},
	}
	var out string
	issueCmd := &cobra.Command{
		Use:   "issue HOST [HOST...]",
		Short: "Sign a certificate for a server or agent by its names and addresses",
		Example: `  sluice ca issue --dir /etc/sluice/ca --out /etc/sluice/sched1 sched1.example.org 10.0.0.5
  sluice serve --tls-cert /etc/sluice/sched1.pem --tls-key /etc/sluice/sched1.key`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				out = filepath.Join(dir, args[0])
			}
			cert, key, err := pki.Issue(dir, args, out, time.Now())
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), caFilesOut{Cert: cert, Key: key, Hosts: args, ValidDays: int(pki.CertLifetime.Hours() / 24)})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "certificate %s, key %s (for %v, valid %d days)\n", cert, key, args, int(pki.CertLifetime.Hours()/24))
			return nil
		},
	}
	for _, c := range []*cobra.Command{initCmd, issueCmd} {
		c.Flags().StringVar(&dir, "dir", "", "the authority's directory (required)")
		_ = c.MarkFlagRequired("dir")
		c.Flags().BoolVar(&asJSON, "json", false, "print the files written as JSON")
	}
	issueCmd.Flags().StringVar(&out, "out", "", "where to write OUT.pem and OUT.key (default: DIR/HOST)")
	cmd.AddCommand(initCmd, issueCmd)
	return cmd
}

// caFilesOut is what `sluice ca init --json` and `ca issue --json` print.
type caFilesOut struct {
	Cert      string   `json:"cert"`
	Key       string   `json:"key"`
	Hosts     []string `json:"hosts,omitempty"`
	ValidDays int      `json:"valid_days,omitempty"`
}
