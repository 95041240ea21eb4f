package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sluice-dtn/sluice/report"
	"github.com/sluice-dtn/sluice/sched"
	"github.com/sluice-dtn/sluice/sim"
)

// newSimFacility is `sluice sim facility`: a facility day (docs/SCALING.md) —
// thousands of endpoints, millions of transfers of SC'15 sizes — replayed
// by the streaming engine, with the replay's wall time and memory and the
// scheduler's cycle time against its queue.
func newSimFacility() *cobra.Command {
	spec := sim.DefaultFacilitySpec()
	var (
		scheduler, plotDir, out, name string
		jsonOut, completion, progress bool
		cycle, startup, pf, beta      float64
		resolution                    float64
		maxCC                         int
	)
	cmd := &cobra.Command{
		Use:   "facility",
		Short: "Replay a generated facility day (thousands of endpoints, millions of transfers) and measure the run",
		Long: `Generates a facility of --endpoints DTNs (1 to 100 Gb/s) and a day of --transfers
arrivals, and replays it under one scheduler with the simulator's streaming
engine; it reports the replay's cost and, per cycle, the scheduler's time by
queued tasks. --until H replays the first H hours. See docs/simulator.md.`,
		Example: `  sluice sim facility --endpoints 50 --transfers 250000 --plot charts/
  sluice sim facility --until 2 --progress --out day-2h.json --plot charts/`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := spec.Validate(); err != nil {
				return err // it names the quantity: endpoints, load, ...
			}
			if spec.Until > spec.Hours {
				return fmt.Errorf("--until %g is past the end of the %g-hour day", spec.Until, spec.Hours)
			}
			// The default is capped to the endpoints there are (a small
			// facility sends to all the others); a number asked for is
			// not cut down without a word.
			if cmd.Flags().Changed("partners") && spec.Partners > spec.Endpoints-1 {
				return fmt.Errorf("--partners %d: each of the %d endpoints has only %d others", spec.Partners, spec.Endpoints, spec.Endpoints-1)
			}
			so := sched.Options{PF: pf, Beta: beta, MaxCC: maxCC}
			if _, err := sched.New(scheduler, so); err != nil {
				return fmt.Errorf("--scheduler: %w", err)
			}
			if !(resolution >= 0) || math.IsInf(resolution, 1) {
				return errors.New("--resolution must be a finite number of seconds, not negative")
			}
			if !(cycle > 0) || !(startup >= 0) {
				return errors.New("--cycle must be positive and --startup not negative")
			}
			if plotDir != "" {
				if err := os.MkdirAll(plotDir, 0o755); err != nil {
					return fmt.Errorf("--plot: %w", err)
				}
			}
			if out != "" {
				// Before hours of replay, not after.
				if err := checkOutFile(out); err != nil {
					return fmt.Errorf("--out: %w", err)
				}
			}
			if name == "" {
				name = facilityName(spec)
			}
			o := sim.FacilityRunOptions{
				Scheduler: scheduler, Sched: so,
				Options:    sim.Options{Cycle: cycle, Startup: startup, NoStartup: startup == 0, NoCycleOnCompletion: !completion},
				Resolution: resolution,
			}
			if progress {
				stderr := cmd.ErrOrStderr()
				o.OnTimeline = func(p sim.TimelinePoint) {
					fmt.Fprintf(stderr, "t=%6.2f h  arrived %d  completed %d  waiting %d  in flight %d  cycles %d (mean %.2f ms wall, %.2f ms CPU)  wall %.0f s  CPU %.0f s  heap %d MB\n",
						p.Hour, p.Arrived, p.Completed, p.Waiting, p.InFlight, p.Cycles, p.MeanCycleMs, p.MeanCycleCPUMs, p.WallSeconds, p.CPUSeconds, p.HeapBytes>>20)
				}
			}
			rep, err := sim.RunFacility(spec, o)
			if err != nil {
				return err
			}
			if out != "" {
				if err := writeJSONFile(out, rep); err != nil {
					return err
				}
			}
			if jsonOut {
				if err := printJSON(cmd.OutOrStdout(), rep); err != nil {
					return err
				}
			} else {
				printFacility(cmd.OutOrStdout(), rep)
			}
			if plotDir != "" {
				if err := plotFacility(plotDir, name, rep); err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s.svg and .png\n", filepath.Join(plotDir, name))
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&spec.Endpoints, "endpoints", spec.Endpoints, "endpoints in the facility")
	fl.Int64Var(&spec.Transfers, "transfers", spec.Transfers, "transfers over the whole day")
	fl.Float64Var(&spec.Hours, "hours", spec.Hours, "length of the day in hours")
	fl.Float64Var(&spec.Until, "until", 0, "replay only the first this many hours of the day (0: all of it)")
	fl.Float64Var(&spec.Load, "load", spec.Load, "utilisation offered to every endpoint")
	fl.Float64Var(&spec.SizeLoad, "sizes", spec.SizeLoad, "file sizes of the SC'15 trace of this load (0.45: the 45% trace)")
	fl.IntVar(&spec.Partners, "partners", spec.Partners, "endpoints each endpoint sends to")
	fl.Int64Var(&spec.Seed, "seed", spec.Seed, "seed of the facility and its arrivals")
	fl.StringVar(&scheduler, "scheduler", "seal", "scheduler: "+strings.Join(sched.Names(), ", "))
	fl.Float64Var(&pf, "pf", 1.5, "SEAL preemption factor")
	fl.Float64Var(&beta, "beta", 0.10, "FindThrCC threshold (fractional gain needed to add concurrency)")
	fl.IntVar(&maxCC, "max-cc", 16, "largest concurrency of one task")
	fl.Float64Var(&cycle, "cycle", 0.5, "scheduling cycle in seconds")
	fl.Float64Var(&startup, "startup", 0.5, "start-up cost of a (re)start in seconds")
	fl.Float64Var(&resolution, "resolution", 0, "round completion times up to multiples of this many seconds (0: exact)")
	fl.BoolVar(&completion, "completion-cycles", false, "also run a cycle when a completion frees capacity while tasks wait (as sim run does)")
	fl.BoolVar(&jsonOut, "json", false, "print the report as JSON")
	fl.StringVar(&out, "out", "", "also write the report as JSON to this file")
	fl.StringVar(&plotDir, "plot", "", plotFlagHelp+": the cycle time against queued (and all) tasks")
	fl.StringVar(&name, "name", "", "chart file name without extension (default facility-ENDPOINTSep-TRANSFERS[-UNTILh])")
	fl.BoolVar(&progress, "progress", false, "print the run's state every 15 simulated minutes on stderr")
	moreFlags(cmd, "docs/simulator.md", "sizes", "partners", "seed", "pf", "beta", "max-cc", "cycle", "startup", "resolution", "completion-cycles", "name")
	return cmd
}

// facilityName is the default chart name: facility-5000ep-25M, with the
// replayed hours when not the whole day.
func facilityName(s sim.FacilitySpec) string {
	n := strconv.FormatInt(s.Transfers, 10)
	switch {
	case s.Transfers >= 1e6 && s.Transfers%1e5 == 0:
		n = strconv.FormatFloat(float64(s.Transfers)/1e6, 'f', -1, 64) + "M"
	case s.Transfers >= 1e3 && s.Transfers%100 == 0:
		n = strconv.FormatFloat(float64(s.Transfers)/1e3, 'f', -1, 64) + "k"
	}
	name := fmt.Sprintf("facility-%dep-%s", s.Endpoints, n)
	if s.Until > 0 && s.Until < s.Hours {
		name += "-" + strconv.FormatFloat(s.Until, 'f', -1, 64) + "h"
	}
	return name
}

func writeJSONFile(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	if err := writeOutFile(path, 0o644, func(w io.Writer) error {
		_, err := w.Write(append(data, '\n'))
		return err
	}); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	return nil
}

func plotFacility(dir, name string, rep *sim.FacilityReport) error {
	bins := func(bs []sim.CycleBin) []report.CycleTimeBin {
		var out []report.CycleTimeBin
		for _, b := range bs {
			out = append(out, report.CycleTimeBin{Lo: b.Lo, Hi: b.Hi, Cycles: b.Cycles, Median: b.Median, P99: b.P99, CPUMedian: b.CPUMedian, CPUP99: b.CPUP99})
		}
		return out
	}
	var sq, st []report.CycleTimePoint
	for _, p := range rep.Sample {
		sq = append(sq, report.CycleTimePoint{Tasks: p.Waiting, Ms: p.Ms, CPUMs: p.CPUMs})
		st = append(st, report.CycleTimePoint{Tasks: p.Waiting + p.Running, Ms: p.Ms, CPUMs: p.CPUMs})
	}
	f := rep.Facility
	title := fmt.Sprintf("%s cycle time: %d endpoints, %s transfers%s", rep.Scheduler, f.Spec.Endpoints, humanInt(rep.Result.Arrived), untilText(f.Spec))
	err := report.CycleTimeVsTasks(dir, name, title, []report.CyclePanel{
		{XLabel: "queued (waiting) tasks", Bins: bins(rep.CyclesByQueued), Sample: sq},
		{XLabel: "queued + running tasks", Bins: bins(rep.CyclesByTasks), Sample: st},
	})
	if err != nil {
		return fmt.Errorf("--plot: %w", err)
	}
	return nil
}

func untilText(s sim.FacilitySpec) string {
	if s.Until > 0 && s.Until < s.Hours {
		return fmt.Sprintf(" (first %g h of a %g h day)", s.Until, s.Hours)
	}
	return fmt.Sprintf(" in %g h", s.Hours)
}

// humanInt writes n with thousands separators.
func humanInt(n int64) string {
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 && s[i-1] != '-' {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func printFacility(w io.Writer, rep *sim.FacilityReport) {
	f, r, p := rep.Facility, rep.Result, rep.Perf
	var cls []string
	for _, c := range f.Classes {
		cls = append(cls, fmt.Sprintf("%s×%d at %.3g Gb/s", c.Name, c.Count, c.CapacityGbps))
	}
	fmt.Fprintf(w, "facility: %d endpoints (%s; nominal capacities ×%.4g), %d links, offered utilisation %.3f-%.3f (would be %.2f%% at nominal capacities)\n",
		f.Spec.Endpoints, strings.Join(cls, ", "), f.CapacityScale, f.Links, f.OfferedMin, f.OfferedMax, 100*f.NominalUtilisation)
	fmt.Fprintf(w, "day: %s transfers%s, SC'15 %s%% sizes (mean %.0f MB), seed %d\n",
		humanInt(f.Spec.Transfers), untilText(f.Spec), strconv.FormatFloat(f.Spec.SizeLoad*100, 'f', -1, 64), f.MeanSize/1e6, f.Spec.Seed)
	fmt.Fprintf(w, "scheduler %s, cycle %g s, start-up %g s, cycles on completion: %v", rep.Scheduler, rep.Cycle, rep.Startup, rep.CompletionCycles)
	if rep.Resolution > 0 {
		fmt.Fprintf(w, ", completion times in steps of %g ms", rep.Resolution*1000)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "replay: %.1f s wall, %.1f s CPU (facility built in %.2f s), %.0f simulated s per wall s, peak RSS %.0f MB, peak Go heap %.0f MB\n",
		p.ReplaySeconds, p.ReplayCPUSeconds, p.GenerateSeconds, p.SimPerWall, float64(p.PeakRSSBytes)/1e6, float64(p.PeakHeapBytes)/1e6)
	fmt.Fprintf(w, "transfers: %s arrived, %s completed, %.1f TB; starts %d, preemptions %d, concurrency changes %d, makespan %.0f s\n",
		humanInt(r.Arrived), humanInt(r.Completed), r.Bytes/1e12, r.Starts, r.Preemptions, r.Resizes, r.Makespan)
	s := r.Interactive
	fmt.Fprintf(w, "slowdown: mean %.3f, p50 %.3f, p90 %.3f, p99 %.3f, max %.1f; turnaround mean %.1f s, p99 %.1f s; wait mean %.2f s, p99 %.1f s\n",
		s.AvgSlowdown, s.P50Slowdown, s.P90Slowdown, s.P99Slowdown, s.MaxSlowdown, s.AvgTurnaround, s.P99Turnaround, s.AvgWait, s.P99Wait)
	fmt.Fprintf(w, "cycles: %s; Schedule %.1f s wall, %.1f s CPU in all (%.0f%% of the replay's wall time); largest queue %d, most running %d\n",
		humanInt(r.Cycles), p.ScheduleSeconds, p.ScheduleCPUSeconds, 100*p.ScheduleShare, r.MaxWaiting, r.MaxRunning)
	fmt.Fprintln(w, "cycle time of Schedule by queued tasks (ms; CPU time of its thread, and wall time):")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "queued tasks\tcycles\tmean running\tCPU median\tCPU p99\tCPU max\twall median\twall p99\twall max\t")
	for _, b := range rep.CyclesByQueued {
		rng := strconv.Itoa(b.Lo)
		if b.Hi > b.Lo {
			rng += "-" + strconv.Itoa(b.Hi)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.3g\t%.3g\t%.3g\t%.3g\t%.3g\t%.3g\t\n", rng, b.Cycles, b.MeanOther, b.CPUMedian, b.CPUP99, b.CPUMax, b.Median, b.P99, b.Max)
	}
	tw.Flush()
}
