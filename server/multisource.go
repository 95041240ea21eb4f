package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/sluice-dtn/sluice/access"
	"github.com/sluice-dtn/sluice/auth"
	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/backend/sluice"
	"github.com/sluice-dtn/sluice/copyjob"
	"github.com/sluice-dtn/sluice/engine"
	"github.com/sluice-dtn/sluice/multisrc"
	"github.com/sluice-dtn/sluice/multisrc/forecast"
	"github.com/sluice-dtn/sluice/store"
)

// Multi-source files (Yang, Schopf, Foster, "Improving Parallel Data Transfer
// Times Using Predicted Variances in Shared Networks"): a file submitted with
// several sources is stat'ed at every replica before it queues (their sizes
// must agree), and each run is one engine transfer reading from all of them
// at once, the destination agent pulling each replica's part. The parts are
// planned by the job's selection from each pair's recent per-stream
// throughput (the service's passive observations of earlier transfers;
// every finished single-source file adds one), aggregated four at a time
// into the paper's interval series; a pair without history makes the
// plan equal parts with work stealing, which needs none.
//
// The scheduler sees a multi-source file's load where it is: CC streams at
// each source (the engine runs CC workers per replica) and all of them at
// the destination, the observed rate split evenly among the sources (the
// engine does not report it per replica). Replica checksums are not
// compared before the copy (that would read every replica whole); a
// replica that sends wrong bytes is found at verification by range
// checksums and dropped, and one whose own bytes are wrong where it sent
// them, the replica the file is checked against, by a second replica's
// checksum read at the same time (engine.Spec.Witness). Such a file is
// verified even in a job that turns verification off (plan): without
// checksums, replicas of one size that differ would be mixed into one
// file.

// eachUse calls f for every endpoint a running task loads, with its
// streams per unit of the task's CC and its part of the task's rate: the
// source and the destination, and with replicas every source and the
// destination with all their streams. A callback, not a slice: the
// snapshot calls it for every running task every cycle.
func (t *task) eachUse(f func(name string, streams int, share float64)) {
	n := len(t.Replicas) + 1
	f(t.SrcEndpoint, 1, 1/float64(n))
	for _, r := range t.Replicas {
		f(urlHost(r), 1, 1/float64(n))
	}
	f(t.DstEndpoint, n, 1)
}

// replicaPlan is one other copy of a task's file.
type replicaPlan struct {
	name string // endpoint
	url  string // agent's http(s)://host:port
	path string
	base string // the read token's link base (auth.Claims.Base; "": none)
}

// linkKeep is the most throughputs kept per pair; linkDegree is how many
// make one interval of the series (eq. 5-6).
const (
	linkKeep   = 256
	linkDegree = 4
)

// linkObserve records a finished transfer's per-stream throughput on its
// pair.
func (w *world) linkObserve(o store.Observation) {
	if o.Throughput <= 0 || o.CC < 1 {
		return
	}
	k := [2]string{o.Src, o.Dst}
	s := append(w.links[k], o.Throughput/float64(o.CC))
	if len(s) > linkKeep {
		s = s[len(s)-linkKeep:]
	}
	w.links[k] = s
}

// planReplicas fills p's replicas and the split of the file across the
// sources.
func (w *world) planReplicas(t *task, p *plan, acc *access.Check) {
	for _, r := range t.Replicas {
		name := urlHost(r)
		rp := replicaPlan{name: name, path: urlPath(r)}
		rp.base = acc.LinkBase(name, rp.path, AccessRead)
		if err := acc.Allow(name, rp.path, AccessRead); err != nil && p.denied == nil {
			p.denied = fmt.Errorf("%w: access changed since the job was submitted: %w", backend.ErrPermission, err)
		}
		if e := w.eps[name]; e != nil {
			rp.url = e.URL
		}
		p.replicas = append(p.replicas, rp)
	}
	split := t.job.Selection
	if split == "" {
		split = string(multisrc.TCS)
	}
	names := []string{t.SrcEndpoint}
	for _, r := range p.replicas {
		names = append(names, r.name)
	}
	links := make([]multisrc.Link, len(names))
	known := true
	for i, n := range names {
		series := w.links[[2]string{n, t.DstEndpoint}]
		mean, sd, ok := forecast.Interval(series, linkDegree, forecast.DefaultWindow)
		if !ok || mean <= 0 {
			known = false
			break
		}
		cc := float64(max(t.CC, 1))
		links[i] = multisrc.Link{Name: n, Mean: mean * cc, SD: sd * cc}
	}
	p.steal = split == copyjob.Dynamic
	pol := multisrc.Policy(split)
	if p.steal {
		pol = multisrc.TCS
	}
	p.shares = make([]float64, len(names))
	p.rates = make([]float64, len(names))
	var alloc []int64
	var err error
	if known && t.Size > 0 {
		alloc, err = multisrc.Split(pol, links, t.Size, 1<<20)
	}
	if !known || t.Size <= 0 || err != nil {
		// Nothing to predict from: equal parts, and the replicas that
		// finish first take over from the others.
		for i := range p.shares {
			p.shares[i] = 1
		}
		p.steal, p.split = true, "equal parts with stealing (no history for "+strings.Join(names, ", ")+")"
		return
	}
	for i, a := range alloc {
		p.shares[i] = float64(a)
		if m := links[i].Mean; m > 0 && !math.IsInf(m, 0) {
			p.rates[i] = m
		}
	}
	p.split = split
}

// rateOf is replica i's predicted rate in the plan, 0 if it has none.
func (p plan) rateOf(i int) float64 {
	if i < len(p.rates) {
		return p.rates[i]
	}
	return 0
}

// urlHost is the endpoint of a sluice://endpoint/path URL.
func urlHost(u string) string {
	rest := u[strings.Index(u, "://")+3:]
	host, _, _ := strings.Cut(rest, "/")
	return host
}

// replicaBackend returns a client of replica r with a read token for its
// file.
func (s *Server) replicaBackend(ctx context.Context, p plan, r replicaPlan) (*sluice.Backend, sluice.TokenSource, error) {
	if r.url == "" {
		return nil, nil, fmt.Errorf("%w: endpoint %s not registered", backend.ErrInvalid, r.name)
	}
	sub := fmt.Sprintf("job %d file %d", p.task.JobID, p.task.Index)
	toks, err := s.dataTokenSource(auth.Claims{Sub: sub, Scope: "read", Prefix: r.path, Base: baseFor(r.base, r.path), Aud: r.name})
	if err != nil {
		return nil, nil, err
	}
	b, err := s.agent(ctx, r.url, toks)
	return b, toks, err
}

// statReplicas stats the file at every source and returns its size; the
// sizes must agree. Sources that cannot be reached are left to the
// engine, which carries on without them, as long as one answers.
func (s *Server) statReplicas(ctx context.Context, p plan) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	src, _, _, err := s.backends(ctx, p)
	if err != nil {
		return 0, err
	}
	type answer struct {
		name string
		fi   backend.FileInfo
		err  error
	}
	answers := make([]answer, len(p.replicas)+1)
	var wg sync.WaitGroup
	wg.Go(func() {
		fi, err := src.Stat(ctx, p.srcPath)
		answers[0] = answer{p.task.Src, fi, err}
	})
	for i, r := range p.replicas {
		wg.Go(func() {
			b, _, err := s.replicaBackend(ctx, p, r)
			var fi backend.FileInfo
			if err == nil {
				fi, err = b.Stat(ctx, r.path)
			}
			answers[i+1] = answer{"sluice://" + r.name + r.path, fi, err}
		})
	}
	wg.Wait()
	size := int64(-1)
	var first string
	var errs []error
	for _, a := range answers {
		switch {
		case a.err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", a.name, a.err))
		case a.fi.IsDir:
			return 0, fmt.Errorf("%w: %s is a directory", backend.ErrInvalid, a.name)
		case size < 0:
			size, first = a.fi.Size, a.name
		case a.fi.Size != size:
			return 0, fmt.Errorf("%w: the sources are not copies of one file: %s has %d bytes, %s has %d", backend.ErrInvalid, first, size, a.name, a.fi.Size)
		}
	}
	if size < 0 {
		err := errors.Join(errs...)
		if len(errs) == len(answers) && allPermanent(errs) {
			return 0, fmt.Errorf("%w: no source of the file can be read: %w", backend.ErrNotFound, err)
		}
		return 0, fmt.Errorf("no source of the file answered: %w", err)
	}
	return size, nil
}

func allPermanent(errs []error) bool {
	for _, err := range errs {
		if !backend.Permanent(err) {
			return false
		}
	}
	return true
}

// multiSources turns spec into a multi-source transfer: every source with
// its planned share, the destination agent pulling from each.
func (s *Server) multiSources(ctx context.Context, spec *engine.Spec, p plan, src *sluice.Backend, srcTok sluice.TokenSource, dst *sluice.Backend) error {
	pull := func(base string, toks sluice.TokenSource) engine.PullFunc {
		return func(ctx context.Context, srcPath, dstPath string, off, n int64, progress func(int64)) error {
			tok, err := toks()
			if err != nil {
				return err
			}
			return dst.PullProgress(ctx, sluice.FileURL(base, srcPath), tok, dstPath, off, n, progress)
		}
	}
	spec.Sources = []engine.Source{{Name: p.task.Src, Backend: src, Path: p.srcPath, Pull: pull(pullBase(p.srcURL), srcTok), Share: p.shares[0], Rate: p.rateOf(0)}}
	for i, r := range p.replicas {
		b, tok, err := s.replicaBackend(ctx, p, r)
		if err != nil {
			return err
		}
		spec.Sources = append(spec.Sources, engine.Source{Name: "sluice://" + r.name + r.path, Backend: b, Path: r.path,
			Pull: pull(pullBase(r.url), tok), Share: p.shares[i+1], Rate: p.rateOf(i + 1)})
	}
	spec.Src, spec.SrcPath, spec.Pull = nil, "", nil
	spec.Steal = p.steal
	// No replica checksums were compared before the copy: a second
	// replica is summed at verification, so that a first replica whose
	// own part is wrong at rest is outvoted rather than trusted.
	spec.Witness = true
	s.log.Info("multi-source transfer", "task", p.task.ID, "sources", len(spec.Sources), "split", p.split, "shares", p.shares)
	return nil
}
