package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-dtn/sluice/sched"
	"github.com/sluice-dtn/sluice/sim"
	"github.com/sluice-dtn/sluice/testbed"
	"github.com/sluice-dtn/sluice/wan"
)

func newTestbedCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "testbed",
		Short: "An emulated multi-DTN testbed on this machine: real server, real agents, real bytes",
		Long: `testbed starts a server and one agent per endpoint of a profile, with an
emulation layer on each agent's data path (capacity, per-connection cap,
contention knee, external load, connection start-up; a test facility, not a
production feature), and replays traces through the live API.

Profiles: sc15-mini (the SC'15 testbed scaled down), xsede-sg (one path
calibrated to SGData.csv), or a JSON file (sim/testbeds/ shows the format).`,
	}
	cmd.AddCommand(newTestbedUp(), newTestbedReplay(), newTestbedCompare(), newTestbedPolicyExp(), newTestbedMultiSource())
	return cmd
}

func newTestbedUp() *cobra.Command {
	var profile, dir, scheduler, netProfile string
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start the profile's server and emulated agents and keep them running",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			tb, err := testbed.Load(profile)
			if err != nil {
				return err
			}
			if dir == "" {
				if dir, err = os.MkdirTemp("", "sluice-testbed-"); err != nil {
					return err
				}
				// Made here, so removed here, once the testbed has
				// stopped (the deferred Close below runs first).
				defer os.RemoveAll(dir)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			n, down, err := upNet(ctx, netProfile, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer down()
			c, err := testbed.Up(ctx, tb, dir, scheduler, cmd.ErrOrStderr(), n)
			if err != nil {
				return err
			}
			defer c.Close()
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "testbed %s up (scheduler %s) in %s\n  server %s\n", tb.Name, scheduler, dir, c.URL)
			names := make([]string, 0, len(c.Agents))
			for n := range c.Agents {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				fmt.Fprintf(out, "  agent %-12s %s serving %s\n", n, c.Agents[n], c.Roots[n])
			}
			fmt.Fprintf(out, "try:\n  export SLUICE_SERVER=%s SLUICE_TOKEN=@%s\n  sluice endpoints\nCtrl-C stops it.\n",
				c.URL, filepath.Join(c.DataDir, "admin.token"))
			// A server that stops on its own (its store damaged or
			// removed) is a failure, not a stop.
			select {
			case <-ctx.Done():
				return nil
			case <-c.Done():
				if ctx.Err() != nil {
					return nil // stopped by the signal
				}
				return fmt.Errorf("testbed: the server stopped: %w", c.Err())
			}
		},
	}
	cmd.Flags().StringVar(&profile, "profile", "sc15-mini", "testbed profile")
	cmd.Flags().StringVar(&dir, "dir", "", "directory for the server's store and the agents' roots, kept (default: a new temporary one, removed when the testbed stops)")
	cmd.Flags().StringVar(&scheduler, "scheduler", "seal", "scheduler: "+strings.Join(sched.Names(), ", "))
	cmd.Flags().StringVar(&netProfile, "net", "", netFlagHelp)
	return cmd
}

// testbedFlags are the flags replay and compare share.
type testbedFlags struct {
	profile, trace string
	seed           int64
	timeScale      float64
	predict        bool
	jsonOut        bool
	dir            string
	net            string
	wan            *wan.Net // the network --net brought up
}

func (f *testbedFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.profile, "profile", "sc15-mini", "testbed profile (sc15-mini, xsede-sg, or a JSON file)")
	fl.StringVar(&f.trace, "trace", "45", "trace: smoke, 25, 45, 60, 45-4x, 60-hv, or a load such as 0.3")
	fl.Int64Var(&f.seed, "seed", 1, "trace seed")
	fl.Float64Var(&f.timeScale, "time-scale", 0, "compress time (and sizes) by this factor instead of the profile's")
	fl.BoolVar(&f.predict, "predict", false, "also run the simulator on the same profile and trace, and print both with the relative error")
	fl.BoolVar(&f.jsonOut, "json", false, "print JSON")
	fl.StringVar(&f.dir, "dir", "", "work directory (default: temporary, removed afterwards)")
	fl.StringVar(&f.net, "net", "", netFlagHelp)
}

const netFlagHelp = "carry the data over an emulated WAN of this network profile (sluice net; sc15 matches sc15-wan and sc15-mini), one host per endpoint, instead of loopback with the profile's emulation; brought up for the command and taken down after (needs root; one such command at a time)"

// upNet brings up the network --net names, if any, under its own prefix
// (which Up clears first: so one such command at a time), with the
// forwarder in its own process as `sluice net up` runs it. The returned
// function takes it down, reporting a failure to errw.
func upNet(ctx context.Context, profile string, errw io.Writer) (*wan.Net, func(), error) {
	if profile == "" {
		return nil, func() {}, nil
	}
	p, err := wan.LoadProfile(profile)
	if err != nil {
		return nil, nil, fmt.Errorf("--net: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return nil, nil, fmt.Errorf("--net: %w", err)
	}
	o := wan.Options{Prefix: "slcb-", Forwarder: func(stateFile string) *exec.Cmd {
		return exec.Command(self, "net", "forward", "--state", stateFile)
	}}
	n, err := wan.Up(ctx, p, o)
	if err != nil {
		return nil, nil, fmt.Errorf("--net %s: %w", profile, err)
	}
	return n, func() {
		if err := n.Close(); err != nil {
			fmt.Fprintf(errw, "sluice: taking the --net network down: %v\n", err)
		}
	}, nil
}

func (f *testbedFlags) load() (*sim.Testbed, error) {
	tb, err := testbed.Load(f.profile)
	if err != nil {
		return nil, err
	}
	if f.timeScale != 0 {
		if f.timeScale < 1 {
			return nil, errors.New("--time-scale must be at least 1")
		}
		// The same capacities with a different compression: sizes shrink
		// with time so that every transfer keeps its share.
		r := *tb.Replay
		r.SizeScale *= r.TimeScale / f.timeScale
		r.TimeScale = f.timeScale
		tb.Replay = &r
	}
	return tb, nil
}

func replayOne(ctx context.Context, f *testbedFlags, tb *sim.Testbed, scheduler string, rep int, log io.Writer) (*testbed.ComparedRun, error) {
	tr, err := testbed.Trace(tb, f.trace, f.seed+int64(rep))
	if err != nil {
		return nil, err
	}
	run, err := testbed.Replay(ctx, tb, tr, testbed.Options{Scheduler: scheduler, Dir: f.dir, Log: log, Net: f.wan})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", scheduler, err)
	}
	out := &testbed.ComparedRun{Scheduler: scheduler, Rep: rep, Seed: f.seed + int64(rep), Measured: run.Result, Verified: run.Verified, Files: run.Files, Seconds: run.Seconds, StartupCost: run.StartupCost, Endpoints: run.Endpoints, Network: run.Network}
	if f.predict {
		if out.Predicted, err = testbed.Predict(tb, tr, scheduler); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func newTestbedReplay() *cobra.Command {
	var f testbedFlags
	var scheduler string
	cmd := &cobra.Command{
		Use:   "replay",
		Short: "Replay a trace on the emulated testbed under one scheduler, on real bytes",
		Example: `  sluice testbed replay --profile sc15-mini --trace 45 --scheduler seal --predict
  sluice testbed replay --trace smoke --scheduler basecc2 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			tb, err := f.load()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			n, down, err := upNet(ctx, f.net, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer down()
			f.wan = n
			r, err := replayOne(ctx, &f, tb, scheduler, 0, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if f.jsonOut {
				return printJSON(cmd.OutOrStdout(), r)
			}
			printRun(cmd.OutOrStdout(), r)
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&scheduler, "scheduler", "seal", "scheduler: "+strings.Join(sched.Names(), ", "))
	return cmd
}

func printRun(out io.Writer, r *testbed.ComparedRun) {
	m := r.Measured
	fmt.Fprintf(out, "testbed %s, trace %s (%d files, %d verified), scheduler %s, %.1f s\n", m.Testbed, m.Trace, r.Files, r.Verified, r.Scheduler, r.Seconds)
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	head := "class\ttasks\tavg slowdown\tavg turnaround s\tmax slowdown\tmax turnaround s\t"
	if r.Predicted != nil {
		head += "sim avg slowdown\terr\tsim avg turnaround s\terr\t"
	}
	fmt.Fprintln(w, head)
	row := func(name string, s sim.Stats, p *sim.Stats) {
		fmt.Fprintf(w, "%s\t%d\t%.3f\t%.2f\t%.2f\t%.1f\t", name, s.N, s.AvgSlowdown, s.AvgTurnaround, s.MaxSlowdown, s.MaxTurnaround)
		if p != nil {
			fmt.Fprintf(w, "%.3f\t%+.0f%%\t%.2f\t%+.0f%%\t", p.AvgSlowdown, testbed.RelErr(p.AvgSlowdown, s.AvgSlowdown), p.AvgTurnaround, testbed.RelErr(p.AvgTurnaround, s.AvgTurnaround))
		}
		fmt.Fprintln(w)
	}
	pred := func(get func(*sim.Result) (sim.Stats, bool)) *sim.Stats {
		if r.Predicted == nil {
			return nil
		}
		if s, ok := get(r.Predicted); ok {
			return &s
		}
		return &sim.Stats{}
	}
	for _, c := range sim.ClassNames {
		if s, ok := m.ByClass[c]; ok {
			row(c, s, pred(func(p *sim.Result) (sim.Stats, bool) { s, ok := p.ByClass[c]; return s, ok }))
		}
	}
	row("all", m.Interactive, pred(func(p *sim.Result) (sim.Stats, bool) { return p.Interactive, true }))
	if m.Batch.N > 0 {
		row("batch", m.Batch, pred(func(p *sim.Result) (sim.Stats, bool) { return p.Batch, true }))
	}
	w.Flush()
	fmt.Fprintf(out, "preemptions %d", m.Preemptions)
	if r.Predicted != nil {
		fmt.Fprintf(out, " (simulated %d)", r.Predicted.Preemptions)
	}
	fmt.Fprintln(out)
}

func newTestbedCompare() *cobra.Command {
	var f testbedFlags
	var schedulers, plotDir string
	var reps int
	var from []string
	cmd := &cobra.Command{
		Use:   "compare",
		Short: "Replay one trace under several schedulers, back to back, on real bytes",
		Long: `Replays one trace under several schedulers, back to back, on real bytes, and
prints every run and per scheduler the medians over repetitions; --plot draws
SC'15's Figure 3 of them, --from prints saved runs. See docs/testbed.md.`,
		Example: `  sluice testbed compare --profile sc15-mini --trace smoke --schedulers basecc2,seal --json
  sluice testbed compare --trace 45 --schedulers basecc1,basecc2,basecc4,basevary,seal --reps 3 --predict
  sluice testbed compare --trace smoke --schedulers basecc1,basecc2,seal --plot charts/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(from) > 0 {
				res, names, err := testbed.LoadComparisons(from)
				if err != nil {
					return fmt.Errorf("--from: %w", err)
				}
				if err := checkPlot(plotDir, names); err != nil {
					return err
				}
				if f.predict {
					// The simulator's predictions again, from the profile
					// --profile names (a model fitted anew, say): each
					// run's trace is generated again from its seed.
					tb, err := f.load()
					if err != nil {
						return err
					}
					if err := testbed.Repredict(tb, res, names); err != nil {
						return fmt.Errorf("--from --predict: %w", err)
					}
					res.Profile = tb.Name
				}
				if f.jsonOut {
					return printJSON(cmd.OutOrStdout(), res)
				}
				res.Print(cmd.OutOrStdout())
				if plotDir != "" {
					return plotTestbedCompare(cmd.ErrOrStderr(), plotDir, res, names)
				}
				return nil
			}
			tb, err := f.load()
			if err != nil {
				return err
			}
			names := splitList(schedulers)
			if len(names) == 0 {
				return fmt.Errorf("--schedulers %q: no scheduler named", schedulers)
			}
			for _, n := range names {
				if _, err := sched.New(n, sched.Options{}); err != nil {
					return err
				}
			}
			if reps < 1 {
				return errors.New("--reps must be at least 1")
			}
			if err := checkPlot(plotDir, names); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			n, down, err := upNet(ctx, f.net, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer down()
			f.wan = n
			res := &testbed.Comparison{Profile: tb.Name, Trace: f.trace, Reps: reps, Date: time.Now().UTC().Format(time.RFC3339)}
			for rep := 0; rep < reps; rep++ {
				for _, n := range names {
					r, err := replayOne(ctx, &f, tb, n, rep, cmd.ErrOrStderr())
					if err != nil {
						return err
					}
					res.Runs = append(res.Runs, r)
					if !f.jsonOut {
						printRun(cmd.OutOrStdout(), r)
						fmt.Fprintln(cmd.OutOrStdout())
					}
				}
			}
			res.Summarise(names)
			if f.jsonOut {
				if err := printJSON(cmd.OutOrStdout(), res); err != nil {
					return err
				}
			} else {
				res.Print(cmd.OutOrStdout())
			}
			if plotDir != "" {
				return plotTestbedCompare(cmd.ErrOrStderr(), plotDir, res, names)
			}
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&schedulers, "schedulers", "basecc1,basecc2,basecc4,basevary,seal", "comma-separated schedulers")
	cmd.Flags().IntVar(&reps, "reps", 1, "repetitions (each with its own trace seed)")
	cmd.Flags().StringVar(&plotDir, "plot", "", plotFlagHelp+": testbed-compare-TRACE, Figure 3 of the measured medians")
	cmd.Flags().StringSliceVar(&from, "from", nil, "print (and --plot) saved comparisons (--json output) instead of replaying; with --predict, predict them again with --profile's model")
	return cmd
}
