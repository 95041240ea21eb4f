package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/sluice-dtn/sluice/backend/sluice"
	"github.com/sluice-dtn/sluice/copyjob"
	"github.com/sluice-dtn/sluice/policy"
)

// cpPolicyFlags make `sluice cp` the Policy Service's adaptive client.
type cpPolicyFlags struct {
	server, token, pair, client string
	ci, cmax, delta, every      int
	threshold                   float64
	follow                      bool
}

func (p *cpPolicyFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&p.server, "policy-server", "", "sluice server whose Policy Service allocates this copy's streams (makes cp its adaptive client)")
	fl.StringVar(&p.token, "policy-token", "", "API token or @FILE for --policy-server (default $SLUICE_TOKEN, then what sluice login saved)")
	fl.StringVar(&p.pair, "policy-pair", "", "SRC:DST endpoint names of the allocation (default: the agents' names)")
	fl.StringVar(&p.client, "policy-client", "", "client name of the allocation (default sluice-cp:HOST:PID)")
	fl.IntVar(&p.ci, "ci", 4, "with --policy-server: initial concurrency (files in flight; the default is at most --cmax)")
	fl.IntVar(&p.cmax, "cmax", 8, "with --policy-server: largest concurrency")
	fl.IntVar(&p.delta, "delta", 1, "with --policy-server: concurrency step of an adaptation")
	fl.IntVar(&p.every, "adapt-every", 4, "with --policy-server: files completed between adaptations (the paper's d)")
	fl.Float64Var(&p.threshold, "threshold", 0.1, "with --policy-server: rate change, as a fraction of the last rate, that moves concurrency")
	fl.BoolVar(&p.follow, "follow-allocation", false, "with --policy-server: run at what the allocation allows, without rate adaptation")
}

// check refuses the adaptive client's flags without --policy-server, and
// --cc with it (the client chooses the concurrency).
func (p *cpPolicyFlags) check(fl *pflag.FlagSet) error {
	own := []string{"policy-token", "policy-pair", "policy-client", "ci", "cmax", "delta", "adapt-every", "threshold", "follow-allocation"}
	if p.server == "" {
		for _, n := range own {
			if fl.Changed(n) {
				return fmt.Errorf("--%s is a setting of the adaptive client: give --policy-server too", n)
			}
		}
		return nil
	}
	if fl.Changed("cc") {
		return errors.New("--policy-server: the adaptive client chooses the concurrency (--ci, --cmax); --cc does not apply")
	}
	if !fl.Changed("ci") {
		// The default follows a smaller --cmax, as an adaptive job's
		// ci does; a --ci given above it is refused.
		p.ci = min(p.ci, max(p.cmax, 1))
	}
	if p.follow {
		// It runs at what the allocation allows, without adapting.
		for _, n := range []string{"ci", "delta", "threshold"} {
			if fl.Changed(n) {
				return fmt.Errorf("--%s does not apply with --follow-allocation, which does not adapt to the rate", n)
			}
		}
	}
	if p.pair != "" {
		s, d, ok := strings.Cut(p.pair, ":")
		if !ok || s == "" || d == "" {
			return fmt.Errorf("--policy-pair %q: want SRC:DST endpoint names", p.pair)
		}
	}
	return nil
}

func (p *cpPolicyFlags) params(streams int) policy.AdaptiveParams {
	return policy.AdaptiveParams{Ci: p.ci, Cmax: p.cmax, Delta: p.delta, D: p.every, P: streams, T: p.threshold, Relative: true, Follow: p.follow}
}

// names returns the allocation's pair: --policy-pair, or the names the
// agents give themselves.
func (p *cpPolicyFlags) names(ctx context.Context, srcs []copyjob.Endpoint, dst copyjob.Endpoint) (string, string, error) {
	if p.pair != "" {
		s, d, _ := strings.Cut(p.pair, ":")
		return s, d, nil
	}
	name := func(e copyjob.Endpoint) (string, error) {
		b, ok := e.Backend.(*sluice.Backend)
		if !ok {
			return "", fmt.Errorf("%s is not a sluice agent: name the pair with --policy-pair SRC:DST", e.URL)
		}
		info, err := b.Info(ctx)
		if err != nil {
			return "", fmt.Errorf("asking %s its name for the allocation: %w", e.URL, err)
		}
		return info.Name, nil
	}
	s, err := name(srcs[0])
	if err != nil {
		return "", "", err
	}
	for _, e := range srcs[1:] {
		if n, err := name(e); err != nil || n != s {
			return "", "", errors.New("--policy-server: sources on several endpoints need one allocation each: copy them separately")
		}
	}
	d, err := name(dst)
	return s, d, err
}

// runPolicyCp copies as the Policy Service's adaptive client.
func runPolicyCp(ctx context.Context, stderr io.Writer, f cpFlags, srcs []copyjob.Endpoint, dst copyjob.Endpoint,
	opt copyjob.Options, show *progressView) (cpReport, error) {
	var rep cpReport
	params := f.pol.params(f.p)
	if err := params.Validate(); err != nil {
		return rep, fmt.Errorf("--policy-server: %w", err)
	}
	cc := clientConfig{Server: f.pol.server, Token: f.pol.token}
	api, err := cc.client()
	if err != nil {
		return rep, fmt.Errorf("--policy-server: %w", err)
	}
	src, dstName, err := f.pol.names(ctx, srcs, dst)
	if err != nil {
		return rep, err
	}
	name := f.pol.client
	if name == "" {
		host, _ := os.Hostname()
		name = fmt.Sprintf("sluice-cp:%s:%d", host, os.Getpid())
	}
	d, err := copyjob.PrepareDataset(ctx, srcs, dst, opt)
	if err != nil {
		return rep, err
	}
	o := copyjob.AdaptiveOptions{Params: params, PP: f.pp}
	if f.verbose {
		o.OnChange = func(pt copyjob.AdaptPoint) {
			fmt.Fprintf(stderr, "policy: %6.1f s  allocation %3d streams  concurrency %2d (%3d streams)  rate %.1f MB/s\n",
				pt.At, pt.Allocated, pt.Concurrency, pt.Streams, pt.Rate/1e6)
		}
	}
	rep.Summary, rep.Adaptation, err = copyjob.RunAdaptive(ctx, d, api.NewAllocator(src, dstName, name), o, show.update)
	show.finish()
	return rep, err
}
