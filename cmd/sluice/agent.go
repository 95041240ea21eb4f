package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-dtn/sluice/agent"
	"github.com/sluice-dtn/sluice/auth"
	"github.com/sluice-dtn/sluice/backend/all"
	"github.com/sluice-dtn/sluice/backend/sluice"
	"github.com/sluice-dtn/sluice/emul"
	"github.com/sluice-dtn/sluice/pki"
	"github.com/sluice-dtn/sluice/wire"
)

func newAgentCmd() *cobra.Command {
	var listen, root, name, keyFile, tlsCert, tlsKey, caFile string
	var serverURL, joinToken, advertise string
	var emulate string
	var pullFrom []string
	var maxMBps float64
	var maxCC int
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Serve a directory tree to sluice transfers (docs/agent-protocol.md)",
		Example: `  sluice keygen /etc/sluice/token.key
  sluice agent --listen :7000 --root /data --name dtn1 --token-key /etc/sluice/token.key`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if maxCC < 0 {
				return fmt.Errorf("agent: --max-cc %d: want 0 (the server's default) or more", maxCC)
			}
			if !(maxMBps >= 0) || math.IsInf(maxMBps, 0) {
				return fmt.Errorf("agent: --max-mbps %v: want 0 (learn it) or a positive rate", maxMBps)
			}
			if root == "" {
				return errors.New("agent: --root is required (the directory to serve)")
			}
			if fi, err := os.Stat(root); errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("agent: root %s does not exist", root)
			} else if err != nil {
				return fmt.Errorf("agent: root: %w", err)
			} else if !fi.IsDir() {
				return fmt.Errorf("agent: root %s is not a directory", root)
			}
			if keyFile == "" && serverURL == "" {
				return errors.New("agent: --token-key (standalone, see `sluice keygen`) or --server with --join-token is required")
			}
			if keyFile != "" && serverURL != "" {
				return errors.New("agent: --token-key and --server exclude each other: a server gives its agents their key")
			}
			if serverURL != "" && joinToken == "" {
				return errors.New("agent: --server needs --join-token (the join.token file in the server's data directory, or @FILE)")
			}
			if (tlsCert == "") != (tlsKey == "") {
				return errors.New("agent: --tls-cert and --tls-key go together")
			}
			var key []byte
			var err error
			if keyFile != "" {
				if key, err = auth.LoadKey(keyFile); err != nil {
					return fmt.Errorf("agent: %w", err)
				}
			}
			if name == "" {
				if name, err = os.Hostname(); err != nil || name == "" {
					return errors.New("agent: --name is required (the host name is unknown)")
				}
			}
			var emulation *emul.Config
			if emulate != "" {
				if emulation, err = emul.Load(emulate); err != nil {
					return fmt.Errorf("agent: --emulate: %w", err)
				}
			}
			// The servers' and other agents' certificates are checked
			// against the system's roots and the site's authority.
			trust, err := pki.ClientTLS(caFile)
			if err != nil {
				return fmt.Errorf("agent: --ca: %w", err)
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("agent: %w", err)
			}
			defer ln.Close()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			var j *agent.Joiner
			if serverURL != "" {
				servers, err := agent.ParseServers(serverURL)
				if err != nil {
					return err
				}
				j = &agent.Joiner{Servers: servers, Info: wire.AgentIn{Name: name, URL: advertiseURL(advertise, ln.Addr(), tlsCert != ""),
					MaxThroughput: maxMBps * 1e6, MaxCC: maxCC}, Log: log, Transport: trustingTransport(trust)}
				if j.Token, err = secretArg(joinToken); err != nil {
					return fmt.Errorf("agent: --join-token: %w", err)
				}
				joined, err := j.Join(ctx)
				if err != nil {
					return pki.Explain(err)
				}
				key = joined.Key
				go j.Heartbeats(ctx, time.Duration(joined.HeartbeatSeconds*float64(time.Second)))
				fmt.Fprintf(cmd.OutOrStdout(), "sluice agent %s joined %s (scheduler %s) as %s\n", name, j.Server(), joined.Scheduler, j.Info.URL)
			}
			pulls := sluice.NewTransport()
			pulls.TLSClientConfig = trust
			s, err := agent.New(agent.Config{Name: name, Root: root, Key: key, Logger: log, Emulation: emulation, PullFrom: pullFrom, Storage: all.Storage(),
				Client: &http.Client{Transport: pulls}})
			if err != nil {
				return err
			}
			if j != nil {
				j.SetHealth(s.Check)
			}
			defer s.Close()
			scheme := "sluice"
			if tlsCert != "" {
				scheme = "sluices"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "sluice agent %s serving %s on %s://%s/\n", name, root, scheme, ln.Addr())
			if err := s.Serve(ctx, ln, tlsCert, tlsKey); err != nil {
				return err
			}
			log.Info("agent stopped")
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", ":7000", "address to listen on (host:port; port 0 picks one)")
	f.StringVar(&root, "root", "", "directory to serve (required)")
	f.StringVar(&name, "name", "", "agent name that tokens must name as audience (default: the host name)")
	f.StringVar(&keyFile, "token-key", "", "file with the token key, mode 0600 (required; see sluice keygen)")
	f.StringVar(&tlsCert, "tls-cert", "", "PEM certificate: serve HTTPS (sluices://)")
	f.StringVar(&tlsKey, "tls-key", "", "PEM private key for --tls-cert")
	f.StringVar(&caFile, "ca", "", "the site's CA certificate (PEM): servers' and other agents' certificates are checked against it besides the system's")
	f.StringVar(&serverURL, "server", "", "join this sluice server (http(s)://host:port; several, comma-separated, for servers sharing one database: the agent fails over between them) instead of using --token-key")
	f.StringVar(&joinToken, "join-token", "", "the server's join token, or @FILE to read it from a file")
	f.StringSliceVar(&pullFrom, "pull-from", nil, "restrict third-party copies to sources at these host:port, IP addresses or CIDR prefixes (comma-separated; default: any source the server names but link-local and multicast addresses)")
	f.StringVar(&advertise, "advertise", "", "URL the server and other agents reach this agent at (default: from --listen)")
	f.Float64Var(&maxMBps, "max-mbps", 0, "this endpoint's maximum aggregate throughput in MB/s, for the server's scheduler (0: learn it); told to the server when joining, not enforced by a standalone agent")
	f.IntVar(&maxCC, "max-cc", 0, "most concurrent transfers the server's scheduler may run here (0: the server's default, 32); told to the server when joining, not enforced by a standalone agent")
	f.StringVar(&emulate, "emulate", "", "TEST FACILITY, never in production: throttle this agent's data path like a WAN DTN "+
		"as the JSON emul.Config in `FILE` says (capacity_bps, conn_bps, knee, decline, external, startup_ms)")
	return cmd
}

func newKeygenCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "keygen FILE",
		Short: "Write a new random token key to FILE (mode 0600; never overwrites)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := auth.GenerateKey(args[0]); err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), struct {
					KeyFile string `json:"key_file"`
				}{args[0]})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote a new token key to %s (anyone who can read it can mint tokens)\n", args[0])
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// trustingTransport is an HTTP transport that verifies servers with cfg.
func trustingTransport(cfg *tls.Config) http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = cfg
	return t
}
