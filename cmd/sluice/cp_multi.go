package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/sluice-dtn/sluice/copyjob"
)

// cpMultiFlags make `sluice cp` a multi-source download.
type cpMultiFlags struct {
	sources  []string
	split    string
	probe    time.Duration
	noVerify bool
}

func (m *cpMultiFlags) register(fl *pflag.FlagSet) {
	fl.StringSliceVar(&m.sources, "sources", nil, "replicas of one file (comma-separated URLs) to download from at once")
	fl.StringVar(&m.split, "split", "tcs", "with --sources: how the bytes are split: "+strings.Join(copyjob.SplitNames(), ", "))
	fl.DurationVar(&m.probe, "probe", 2*time.Second, "with --sources: how long to measure the links before planning")
	fl.BoolVar(&m.noVerify, "no-replica-check", false, "with --sources: compare only the replicas' sizes, not their checksums (which reads each one whole first); the copy is then checked against the first replica only, so one whose own bytes are wrong can go unnoticed")
}

// check refuses the multi-source flags without --sources.
func (m *cpMultiFlags) check(fl *pflag.FlagSet) error {
	for _, n := range []string{"split", "probe", "no-replica-check"} {
		if fl.Changed(n) {
			return fmt.Errorf("--%s is a setting of multi-source copies: give --sources too", n)
		}
	}
	return nil
}

// runMultiCp is `sluice cp --sources A,B,... DST`.
func runMultiCp(ctx context.Context, stdout, stderr io.Writer, f cpFlags, args []string) error {
	if len(args) != 1 {
		return errors.New("--sources: give the destination only, as in sluice cp --sources A,B,C DST")
	}
	if f.recursive || f.pol.server != "" {
		return errors.New("--sources downloads one file: -r and --policy-server do not apply")
	}
	if f.multi.probe <= 0 {
		return errors.New("--probe must be positive")
	}
	for i, s := range f.multi.sources {
		// An empty entry (a trailing comma) would resolve to the
		// current directory and fail as a replica that is a directory.
		if strings.TrimSpace(s) == "" {
			return fmt.Errorf("--sources: entry %d of %d is empty (a stray comma?)", i+1, len(f.multi.sources))
		}
	}
	srcs, dst, jd, done, err := f.resolve(ctx, f.multi.sources, args[0])
	if err != nil {
		return err
	}
	defer done()
	o := copyjob.MultiOptions{Split: f.multi.split, ProbeTime: f.multi.probe, CheckReplicas: !f.multi.noVerify,
		Checksum: f.checksum, JournalDir: jd, SubWrite: f.subWrite, ChunkMin: f.chunkMin, Overwrite: f.overwrite}
	if f.verbose && len(srcs) > 1 {
		fmt.Fprintf(stderr, "probing %d replicas for %s\n", len(srcs), f.multi.probe)
	}
	rep, err := copyjob.RunMulti(ctx, srcs, dst, o)
	if f.verbose && len(rep.Links) > 0 {
		for _, l := range rep.Links {
			fmt.Fprintf(stderr, "  %-40s mean %7.1f MB/s  sd %6.1f  TF %.2f  effective %7.1f MB/s  %5.1f ms  -> %6.1f MB (predicted %.1f s)\n",
				l.Source, l.Mean/1e6, l.SD/1e6, l.TF, l.Effective/1e6, 1000*l.Latency, float64(l.Planned)/1e6, l.Predicted)
		}
	}
	if err != nil {
		return cpError(err)
	}
	if f.jsonOut {
		return printJSON(stdout, rep)
	}
	if rep.Skipped {
		fmt.Fprintf(stderr, "skipped: %s is in place already (%.1f MB, same size and checksum)\n", args[0], float64(rep.Bytes)/1e6)
		return nil
	}
	from := fmt.Sprintf("%d replicas", rep.Replicas)
	switch {
	case len(srcs) == 1:
		from = "1 replica"
	case rep.Replicas < len(srcs):
		from = fmt.Sprintf("%d of %d replicas", rep.Replicas, len(srcs)) // the note says why
	}
	fmt.Fprintf(stderr, "copied %.1f MB from %s in %.1f s (%.1f MB/s; predicted %.1f s; %s split), checksum %s\n",
		float64(rep.Bytes)/1e6, from, rep.Seconds, float64(rep.Bytes)/1e6/max(rep.Seconds, 1e-9), rep.Predicted, rep.Split, rep.Checksum)
	if rep.Note != "" {
		fmt.Fprintf(stderr, "note: %s\n", rep.Note)
	}
	return nil
}
