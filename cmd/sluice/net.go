package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sluice-dtn/sluice/wan"
)

func newNetCmd() *cobra.Command {
	var o wan.Options
	cmd := &cobra.Command{
		Use:   "net",
		Short: "An emulated wide-area network on this machine: hosts in namespaces, the kernel's TCP between them",
		Long: `net builds an emulated WAN (package wan): one network namespace per host of a
profile, each with an address in 198.18.0.0/15 and its own TCP settings, joined
by a user-space forwarder that applies each path's rate, queue, delay, jitter
and loss and each host's NIC capacity. Programs run inside a host with
'sluice net exec HOST -- CMD'. Needs root. See docs/wan.md.

Shipped profiles: ` + strings.Join(wan.Profiles(), ", ") + `; or a JSON file.`,
	}
	cmd.PersistentFlags().StringVar(&o.Prefix, "prefix", wan.DefaultPrefix, "prefix of the namespaces and state files (several networks can run under different prefixes)")
	cmd.PersistentFlags().StringVar(&o.StateDir, "state-dir", wan.DefaultStateDir, "where the state file and control socket live")
	cmd.AddCommand(newNetUp(&o), newNetExec(&o), newNetStatus(&o), newNetSet(&o), newNetDown(&o), newNetForward())
	return cmd
}

func newNetUp(o *wan.Options) *cobra.Command {
	var profile string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "up --profile NAME|FILE",
		Short: "Bring the network up (again: the same profile is left running; anything else under the prefix is replaced)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := wan.LoadProfile(profile)
			if err != nil {
				return err
			}
			self, err := os.Executable()
			if err != nil {
				return fmt.Errorf("net up: %w", err)
			}
			opts := *o
			opts.Forwarder = func(stateFile string) *exec.Cmd {
				return exec.Command(self, "net", "forward", "--state", stateFile)
			}
			n, err := wan.Up(cmd.Context(), p, opts)
			if err != nil {
				return err
			}
			if asJSON {
				hosts := map[string]string{}
				for _, h := range p.Hosts {
					hosts[h.Name] = n.Addr(h.Name).String()
				}
				return writeJSON(cmd.OutOrStdout(), struct {
					Profile string            `json:"profile"`
					PID     int               `json:"forwarder_pid"`
					Hosts   map[string]string `json:"hosts"`
				}{p.Name, n.PID(), hosts})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "network %s up (forwarder pid %d):", p.Name, n.PID())
			for _, h := range p.Hosts {
				fmt.Fprintf(cmd.OutOrStdout(), " %s=%s", h.Name, n.Addr(h.Name))
			}
			fmt.Fprintln(cmd.OutOrStdout())
			return nil
		},
	}
	cmd.Flags().StringVar(&profile, "profile", "", "a shipped profile's name or a profile file")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON: the profile, the forwarder and each host's address")
	_ = cmd.MarkFlagRequired("profile")
	return cmd
}

func newNetExec(o *wan.Options) *cobra.Command {
	return &cobra.Command{
		Use:   "exec HOST -- CMD [ARGS...]",
		Short: "Run a command inside a host of the network (its exit status is sluice's)",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := wan.Attach(*o)
			if err != nil {
				return err
			}
			c, err := n.Command(cmd.Context(), args[0], args[1], args[2:]...)
			if err != nil {
				return err
			}
			c.Stdin, c.Stdout, c.Stderr = os.Stdin, cmd.OutOrStdout(), cmd.ErrOrStderr()
			err = c.Run()
			var exit *exec.ExitError
			if errors.As(err, &exit) && exit.ExitCode() > 0 {
				return &execStatusError{code: exit.ExitCode(), err: err}
			}
			return err
		},
	}
}

// execStatusError is a command run by net exec that failed: sluice exits
// with its status, as ip netns exec and ssh do.
type execStatusError struct {
	code int
	err  error
}

func (e *execStatusError) Error() string { return e.err.Error() }
func (e *execStatusError) Unwrap() error { return e.err }

func newNetStatus(o *wan.Options) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status [--json]",
		Short: "Hosts, addresses, links and the forwarder's counters",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := wan.Attach(*o)
			if err != nil {
				return err
			}
			st, err := n.Status(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintf(w, "profile %s, forwarder pid %d, up %.0f s, cpu %.1f s\n\n", st.Profile, st.PID, st.UptimeSeconds, st.CPUSeconds)
			fmt.Fprintln(w, "HOST\tNAMESPACE\tADDRESS\tMTU\tCC\tRMEM\tWMEM\tNIC OUT/IN MBIT/S\tTUN TX DROPPED")
			for _, h := range st.Hosts {
				fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%d\t%d\t%g/%g\t%d\n", h.Name, h.Namespace, h.Addr, h.MTU, h.CC, h.RmemMax, h.WmemMax, h.NIC.EgressMbps, h.NIC.IngressMbps, h.TUNTxDropped)
			}
			fmt.Fprintln(w)
			fmt.Fprintln(w, "LINK\tMBIT/S\tDELAY MS\tLOSS\tPACKETS\tBYTES\tQUEUE DROPS\tLOSS DROPS\tNIC DROPS")
			for _, l := range st.Links {
				fmt.Fprintf(w, "%s\t%g\t%g\t%g\t%d\t%d\t%d\t%d\t%d\n", l.Name, l.RateMbps, l.Path.DelayMs, l.Path.Loss, l.Packets, l.Bytes, l.QueueDrops, l.RandomDrops+l.BurstDrops, l.EgressDrops+l.IngressDrops)
			}
			return w.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the status as JSON")
	return cmd
}

func newNetSet(o *wan.Options) *cobra.Command {
	return &cobra.Command{
		Use:   `set A>B|A-B|HOST JSON`,
		Short: `Change parameters while the network runs, e.g. set a-b '{"rate_mbps": 500, "loss": 0.001}'`,
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var u wan.Update
			dec := json.NewDecoder(strings.NewReader(args[1]))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&u); err != nil {
				return fmt.Errorf("net set: %w", err)
			}
			n, err := wan.Attach(*o)
			if err != nil {
				return err
			}
			return n.Set(cmd.Context(), args[0], u)
		},
	}
}

func newNetDown(o *wan.Options) *cobra.Command {
	return &cobra.Command{
		Use:   "down",
		Short: "Stop the forwarder and remove the namespaces and state under the prefix",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return wan.Down(cmd.Context(), *o)
		},
	}
}

// newNetForward is the detached forwarder `net up` starts.
func newNetForward() *cobra.Command {
	var state string
	cmd := &cobra.Command{
		Use:    "forward --state FILE",
		Short:  "Run the forwarder of the network in FILE (started by net up)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			err := wan.Forward(ctx, state)
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		},
	}
	cmd.Flags().StringVar(&state, "state", "", "the network's state file")
	_ = cmd.MarkFlagRequired("state")
	return cmd
}
