package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-dtn/sluice/wire"
)

// newEndpointCmd is `sluice endpoint`: storage endpoints (GridFTP and
// XRootD servers) an admin registers, which the service reaches itself
// (server/storage.go). Agents register themselves.
func newEndpointCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "endpoint",
		Short: "Register or remove a storage endpoint (GridFTP, XRootD) (admins)",
		Long: `A storage endpoint is a GridFTP or XRootD server the service reaches itself,
with a credential it keeps (never shown, never in jobs, logs or events). Jobs
then name its files by its URLs (gsiftp://host:port/path, root://host:port/path)
or as sluice://NAME/path. Between two servers of one protocol the servers copy
the bytes themselves (third-party copy); between a server and an agent the
agent reads or writes it; between a GridFTP and an XRootD server the agent
given with --via moves them. Agents join on their own (sluice agent).`,
	}
	cmd.AddCommand(newEndpointAddCmd(), newEndpointRmCmd())
	return cmd
}

func newEndpointAddCmd() *cobra.Command {
	var in wire.StorageEndpointIn
	var user, passwordFile, tokenFile, proxyFile, refresh string
	var expires time.Duration
	var noCredential, asJSON bool
	cmd := &cobra.Command{
		Use:   "add NAME URL",
		Short: "Register (or change) a storage endpoint",
		Example: `  sluice endpoint add xrd1 root://xrd1.example.org:1094 --via dtn1
  sluice endpoint add ftp1 ftp://ftp1.example.org --user sluice --password-file /etc/sluice/ftp1.pass --max-cc 16
  sluice endpoint add gsi1 gsiftp://gsi1.example.org --x509-proxy /tmp/x509up_u0 --refresh "/usr/local/bin/renew-proxy --json"`,
		Args: cobra.ExactArgs(2),
	}
	cc := clientFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		in.URL = args[1]
		cred := wire.CredentialIn{Username: user}
		for _, f := range []struct {
			file string
			dst  *string
		}{{passwordFile, &cred.Password}, {tokenFile, &cred.Token}, {proxyFile, &cred.X509Proxy}} {
			if f.file == "" {
				continue
			}
			b, err := os.ReadFile(f.file)
			if err != nil {
				return fmt.Errorf("endpoint add: %w", err)
			}
			*f.dst = strings.TrimRight(string(b), "\r\n")
			if f.dst == &cred.X509Proxy {
				*f.dst = string(b) // PEM, whole
			}
		}
		if expires > 0 {
			cred.Expires = time.Now().Add(expires)
		}
		if refresh != "" {
			cred.Refresh = strings.Fields(refresh)
		}
		switch {
		case noCredential:
			in.Credential = &wire.CredentialIn{}
		case cred.Username != "" || cred.Password != "" || cred.Token != "" || cred.X509Proxy != "" || cred.Refresh != nil:
			in.Credential = &cred
		}
		cl, err := cc.client()
		if err != nil {
			return fmt.Errorf("endpoint add: %w", err)
		}
		e, err := cl.PutStorageEndpoint(cmd.Context(), args[0], in)
		if err != nil {
			return fmt.Errorf("endpoint add: %w", err)
		}
		if asJSON {
			return writeJSON(cmd.OutOrStdout(), e)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "storage endpoint %s: %s", e.Name, e.URL)
		if e.Via != "" {
			fmt.Fprintf(cmd.OutOrStdout(), " (via agent %s)", e.Via)
		}
		if e.Credential != "" {
			fmt.Fprintf(cmd.OutOrStdout(), ", %s", e.Credential)
		}
		fmt.Fprintln(cmd.OutOrStdout())
		return nil
	}
	f := cmd.Flags()
	f.StringVar(&in.Via, "via", "", "the agent that moves bytes between this server and a storage server of the other protocol")
	f.IntVar(&in.MaxCC, "max-cc", 0, "most partial transfers at once on it (0: no limit)")
	f.Float64Var(&in.MaxThroughput, "max-throughput", 0, "bytes/s it can carry (0: learned from what it moves)")
	f.StringVar(&user, "user", "", "user name (FTP login, or XRootD's unix user)")
	f.StringVar(&passwordFile, "password-file", "", "file holding the FTP password (never given on a command line)")
	f.StringVar(&tokenFile, "token-file", "", "file holding a bearer token (XRootD)")
	f.StringVar(&proxyFile, "x509-proxy", "", "X.509 proxy certificate and key, PEM (gsiftp)")
	f.DurationVar(&expires, "expires", 0, "the credential stops working this long from now (with --refresh, it is renewed before then)")
	f.StringVar(&refresh, "refresh", "", "command on the server that prints a fresh credential as JSON (username, password, token, x509_proxy, expires)")
	f.BoolVar(&noCredential, "no-credential", false, "remove the endpoint's credential")
	f.BoolVar(&asJSON, "json", false, "print the endpoint as JSON")
	return cmd
}

func newEndpointRmCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "rm NAME",
		Short: "Remove a storage endpoint and its credential",
		Args:  cobra.ExactArgs(1),
	}
	cc := clientFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		cl, err := cc.client()
		if err != nil {
			return fmt.Errorf("endpoint rm: %w", err)
		}
		if err := cl.DeleteStorageEndpoint(cmd.Context(), args[0]); err != nil {
			return fmt.Errorf("endpoint rm: %w", err)
		}
		if asJSON {
			return writeJSON(cmd.OutOrStdout(), removedOut{Name: args[0], Removed: true})
		}
		fmt.Fprintf(cmd.OutOrStdout(), "storage endpoint %s removed\n", args[0])
		return nil
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// removedOut is what `sluice endpoint rm --json` prints.
type removedOut struct {
	Name    string `json:"name"`
	Removed bool   `json:"removed"`
}
