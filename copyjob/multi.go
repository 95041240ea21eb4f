package copyjob

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/backend/sluice"
	"github.com/sluice-dtn/sluice/engine"
	"github.com/sluice-dtn/sluice/linkmon"
	"github.com/sluice-dtn/sluice/multisrc"
	"github.com/sluice-dtn/sluice/multisrc/forecast"
)

// Multi-source downloads (Yang, Schopf, Foster, "Improving Parallel Data
// Transfer Times Using Predicted Variances in Shared Networks"): one file
// with replicas at several sources, its bytes split across them by a multisrc
// policy from each link's predicted bandwidth mean and variability, moved by
// the engine with every replica at once.

// Dynamic is the split of TCS with work stealing (engine Spec.Steal): a
// replica that has sent its part takes over the tail of the slowest.
const Dynamic = "tcs-dynamic"

// SplitNames are the --split values: the paper's policies, the variant
// that subtracts the variability, and the dynamic mode.
func SplitNames() []string {
	var out []string
	for _, p := range multisrc.Policies() {
		out = append(out, string(p))
	}
	return append(out, Dynamic)
}

// MultiOptions tunes RunMulti.
type MultiOptions struct {
	// Split is one of SplitNames (default "tcs").
	Split string
	// Monitor, if set, has been sampling the links (one per source, in
	// order) and keeps doing so; otherwise RunMulti probes them for
	// ProbeTime (default 2 s) before planning.
	Monitor   *linkmon.Monitor
	ProbeTime time.Duration
	// History, if set, is what the plan is made from instead of the
	// monitor's live series (a linkmon.Snapshot: several copies planned
	// from one moment's knowledge); Monitor still observes the copy.
	History linkmon.History
	// CheckReplicas compares the replicas' checksums before the copy (a
	// full read at each source; sizes are always compared).
	CheckReplicas bool
	// Checksum, JournalDir, SubWrite and ChunkMin are as in Options; CC
	// is the partial transfers per replica (default 1: one stream per
	// source, as in the paper).
	Checksum, JournalDir string
	SubWrite, ChunkMin   int64
	CC                   int
	// Window is the forecaster's error window (default 10).
	Window int
	// Overwrite replaces a different file at the destination, as
	// Options.Overwrite does; without it the copy fails (ErrExists),
	// also for a file that appears there during the copy, which the
	// final rename keeps (engine.Spec.NoReplace; on a destination that
	// cannot rename without replacing, a stat just before the rename,
	// which leaves a short race).
	Overwrite bool
}

// LinkPlan is what the planner knew and decided for one replica.
type LinkPlan struct {
	Source    string  `json:"source"`
	Mean      float64 `json:"mean_bps"`
	SD        float64 `json:"sd_bps"`
	TF        float64 `json:"tuning_factor"`
	Effective float64 `json:"effective_bps"`
	Latency   float64 `json:"latency_s"`
	Samples   int     `json:"samples"`
	Planned   int64   `json:"planned_bytes"`
	// Predicted is the planned part's predicted time, s.
	Predicted float64 `json:"predicted_s"`
}

// MultiReport is what RunMulti did.
type MultiReport struct {
	Split   string     `json:"split"`
	Bytes   int64      `json:"bytes"`
	Seconds float64    `json:"seconds"` // the copy, after planning
	PlanS   float64    `json:"plan_seconds"`
	Links   []LinkPlan `json:"links"`
	// Predicted is the plan's predicted transfer time (the latest link).
	Predicted float64 `json:"predicted_s"`
	Checksum  string  `json:"checksum,omitempty"`
	// Replicas is how many replicas the file came from: those named, less
	// those left out before the copy or dropped during it (Note says why).
	Replicas int    `json:"replicas"`
	Note     string `json:"note,omitempty"`
	// Skipped says the file was in place already (same size and
	// checksum, or same size with checksum none): nothing was copied.
	Skipped bool `json:"skipped,omitempty"`
}

// RunMulti copies one file from its replicas srcs (every endpoint a file;
// their sizes must agree; one replica alone is copied from) to dst: it plans the split with o.Split over the
// links' predicted bandwidth, then moves the parts from every replica at
// once through the engine (journal, resume, checksum, rename as for one
// source). dst ending in "/" is a directory that receives the file under
// the first source's name.
func RunMulti(ctx context.Context, srcs []Endpoint, dst Endpoint, o MultiOptions) (MultiReport, error) {
	rep := MultiReport{Split: o.Split}
	if rep.Split == "" {
		rep.Split = string(multisrc.TCS)
	}
	pol := multisrc.Policy(rep.Split)
	steal := rep.Split == Dynamic
	if steal {
		pol = multisrc.TCS
	} else if _, err := multisrc.ParsePolicy(rep.Split); err != nil {
		return rep, fmt.Errorf("copyjob: split %q: want one of %s", rep.Split, strings.Join(SplitNames(), ", "))
	}
	if len(srcs) == 0 {
		return rep, fmt.Errorf("copyjob: %w: a multi-source copy needs a replica", backend.ErrInvalid)
	}
	seen := map[string]string{}
	for _, s := range srcs {
		// One replica named twice would agree with itself, and be
		// counted twice when replicas vote: also in two spellings of
		// its URL.
		k := replicaKey(s)
		if first, ok := seen[k]; ok {
			if first == s.URL {
				return rep, fmt.Errorf("copyjob: %w: replica %s is named twice", backend.ErrInvalid, s.URL)
			}
			return rep, fmt.Errorf("copyjob: %w: replica %s is named twice (also as %s)", backend.ErrInvalid, first, s.URL)
		}
		seen[k] = s.URL
	}
	if err := sameAgentReplicas(ctx, srcs); err != nil {
		return rep, err
	}
	if o.JournalDir == "" {
		return rep, fmt.Errorf("copyjob: %w: a journal directory is required", backend.ErrInvalid)
	}
	if o.ProbeTime <= 0 {
		o.ProbeTime = 2 * time.Second
	}
	start := time.Now()
	size, sum, drop, err := checkReplicas(ctx, srcs, o)
	if err != nil {
		return rep, err
	}
	rep.Bytes = size
	var keep []int // the replicas the copy uses: all but those checkReplicas left out
	for i, s := range srcs {
		if why, ok := drop[i]; ok {
			rep.Note = joinNote(rep.Note, fmt.Sprintf("replica %s not used: %s", s.URL, why))
			continue
		}
		keep = append(keep, i)
	}
	dstPath := dst.Path
	if !strings.HasSuffix(dstPath, "/") {
		// An existing directory receives the file, as in a copy from
		// one source.
		if fi, err := dst.Backend.Stat(ctx, dstPath); err == nil && fi.IsDir {
			dstPath += "/"
		}
	}
	if strings.HasSuffix(dstPath, "/") {
		dstPath += path.Base(strings.TrimSuffix(srcs[0].Path, "/"))
	}
	// Not onto a replica: the file would be renamed over one it is
	// read from, as a copy of one source onto itself would.
	for _, s := range srcs {
		if replicaKey(s) == replicaKey(Endpoint{URL: dst.URL, Path: dstPath}) {
			return rep, fmt.Errorf("copyjob: %w: the destination %s is replica %s: a file is not copied onto itself", backend.ErrInvalid, dstPath, s.URL)
		}
	}
	// Before the links are probed: the file in place already (a rerun)
	// is not copied again, and another file there is not replaced
	// unasked.
	if there, err := multiInPlace(ctx, srcs[keep[0]], dst, dstPath, size, sum, o); err != nil {
		return rep, err
	} else if there {
		rep.Skipped, rep.Checksum = true, sum
		rep.Note = joinNote(rep.Note, "already in place: not copied")
		return rep, nil
	}

	mon := o.Monitor
	if mon == nil {
		var links []linkmon.Link
		for _, s := range srcs {
			links = append(links, linkmon.Link{Name: s.URL, Backend: s.Backend, Path: s.Path, Size: size})
		}
		mon = linkmon.New(links, linkmon.Options{})
		// One replica (named alone, or the only one left) sends every
		// byte: there is nothing to split, and no link to measure.
		if len(keep) > 1 {
			if err := mon.Collect(ctx, o.ProbeTime); err != nil {
				return rep, err
			}
		}
	}
	var hist linkmon.History = mon
	if o.History != nil {
		hist = o.History
	}
	all, plans := predictLinks(hist, srcs, size, o.Window)
	links := make([]multisrc.Link, len(keep))
	var unmeasured []string
	for k, i := range keep {
		links[k] = all[i]
		if !(all[i].Mean > 0) {
			unmeasured = append(unmeasured, srcs[i].URL)
		}
	}
	var alloc []int64
	if len(keep) == 1 {
		alloc = []int64{size}
	} else if len(unmeasured) > 0 {
		// A replica the probes could not measure (too slow to answer
		// within the probe time, or failing) would be planned out: plan
		// equal parts instead and let the replicas that finish first
		// take over from the others, which needs no prediction. The
		// engine drops a replica that fails.
		alloc = equalParts(size, len(keep))
		steal = true
		rep.Split += " (equal parts with stealing: no measurement of " + strings.Join(unmeasured, ", ") + ")"
	} else if alloc, err = multisrc.Split(pol, links, size, 64<<10); err != nil {
		return rep, fmt.Errorf("copyjob: planning the split: %w", err)
	}
	fin := multisrc.Finish(pol, links, alloc)
	for k, i := range keep {
		plans[i].Effective = multisrc.EffectiveBW(pol, links[k])
		plans[i].Planned = alloc[k]
		// No prediction for a link without one (JSON has no infinity).
		if f := fin[k]; f > 0 && !math.IsInf(f, 0) && !math.IsNaN(f) {
			plans[i].Predicted = f
			rep.Predicted = max(rep.Predicted, f)
		}
	}
	rep.Links = plans
	rep.PlanS = time.Since(start).Seconds()

	spec := engine.Spec{
		Dst: dst.Backend, DstPath: dstPath, Size: size, CC: max(1, o.CC),
		ChunkMin: o.ChunkMin, SubWrite: o.SubWrite, Checksum: o.Checksum, Steal: steal,
		Journal: journalFor(o.JournalDir, "multi:"+srcs[0].URL, dst.URL+dstPath),
		// The checksum the replicas' majority holds: the copy must end
		// with it, whichever replica the engine checks against at the
		// end (the first, which may be the one that goes bad).
		Expected: sum,
		// Never over a file that appeared since multiInPlace looked
		// (the links were probed meanwhile, and the copy is long).
		NoReplace: !o.Overwrite,
	}
	for k, i := range keep {
		s := srcs[i]
		src := engine.Source{Name: s.URL, Backend: mon.Observe(i), Path: s.Path, Share: float64(alloc[k])}
		if m := links[k].Mean; m > 0 && !math.IsInf(m, 0) {
			src.Rate = m // the prediction stealing weighs it by until it delivers
		}
		if pull := pullerFor(s, dst); pull != nil {
			src.Pull = pull
			src.Backend = s.Backend
		}
		spec.Sources = append(spec.Sources, src)
	}
	copyStart := time.Now()
	res, err := engine.Run(ctx, spec)
	rep.Seconds = time.Since(copyStart).Seconds()
	rep.Checksum, rep.Note = res.Checksum, joinNote(rep.Note, res.Note)
	rep.Replicas = res.Sources
	if errors.Is(err, backend.ErrNoSpace) {
		// As for one source: a partial copy kept for a resume would only
		// hold on to the space that ran out.
		dst.Backend.Remove(context.WithoutCancel(ctx), engine.TempName(dstPath))
		os.Remove(spec.Journal)
	}
	if err != nil && !o.Overwrite && errors.Is(err, engine.ErrDestinationExists) {
		// Something appeared at dstPath during the copy and was kept:
		// looked at again as before the copy, it is the file itself
		// (skipped) or the copy fails as it would have then
		// (ErrExists). The verified temporary file and the journal
		// are kept, as for a file refused before the copy: a later
		// run with Overwrite puts it in place without sending it again.
		there, ierr := multiInPlace(ctx, srcs[keep[0]], dst, dstPath, size, sum, o)
		switch {
		case there:
			dst.Backend.Remove(context.WithoutCancel(ctx), engine.TempName(dstPath))
			os.Remove(spec.Journal)
			rep.Skipped, rep.Checksum = true, sum
			rep.Note = joinNote(rep.Note, "already in place (put there by another copy meanwhile): not replaced")
			return rep, nil
		case ierr != nil:
			return rep, ierr
		}
		return rep, fmt.Errorf("copyjob: %s %w; use --overwrite to replace it", dstPath, ErrExists)
	}
	if err != nil {
		return rep, fmt.Errorf("%s -> %s: %w", srcs[0].URL, dstPath, err)
	}
	return rep, nil
}

// multiInPlace reports whether dst's path holds the file already: the
// replicas' size and checksum (sum, the majority's, when they were
// compared; else asked of replica src), or the size alone with checksum
// none. Another file there fails the copy (ErrExists) unless Overwrite.
func multiInPlace(ctx context.Context, src, dst Endpoint, dstPath string, size int64, sum string, o MultiOptions) (bool, error) {
	fi, err := dst.Backend.Stat(ctx, dstPath)
	switch {
	case errors.Is(err, backend.ErrNotFound) || err != nil && o.Overwrite:
		return false, nil
	case err != nil:
		return false, fmt.Errorf("copyjob: %s: cannot tell whether another file is there: %w", dstPath, err)
	case fi.IsDir:
		return false, fmt.Errorf("copyjob: %s: %w: a directory is there", dstPath, ErrExists)
	}
	same := fi.Size == size
	if algo := o.Checksum; same && algo != "none" {
		if algo == "" {
			algo = engine.DefaultChecksum
		}
		// As checkReplicas waits for a replica's checksum.
		cctx, cancel := context.WithTimeout(ctx, backend.ReadWait(replicaAnswerTimeout, size, backend.ChecksumRate))
		defer cancel()
		want, err := sum, error(nil)
		if want == "" {
			want, err = src.Backend.Checksum(cctx, src.Path, algo)
		}
		var got string
		if err == nil {
			got, err = dst.Backend.Checksum(cctx, dstPath, algo)
		}
		switch {
		case err != nil && o.Overwrite:
			return false, nil
		case err != nil:
			return false, fmt.Errorf("copyjob: %s exists and cannot be compared with the replicas (%w); use --overwrite to replace it", dstPath, err)
		}
		same = got == want
	}
	switch {
	case same:
		return true, nil
	case o.Overwrite:
		return false, nil
	}
	return false, fmt.Errorf("copyjob: %s %w; use --overwrite to replace it", dstPath, ErrExists)
}

// replicaKey is what names one replica's file however its URL is spelled:
// the scheme and host in lower case and the (decoded) path cleaned, as
// the agent resolves it ("/d//f", "/d/./f" and "/d/%66" are "/d/f"). Two
// names of one host (an address and a host name) are not recognised.
func replicaKey(s Endpoint) string {
	u, err := url.Parse(s.URL)
	if err != nil {
		return s.URL
	}
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Host) + path.Clean("/"+s.Path)
}

// agentInfoer is a replica's backend that can say which agent it reaches
// (backend/sluice).
type agentInfoer interface {
	Info(context.Context) (sluice.Info, error)
}

// sameAgentReplicas refuses a replica named through two host names of one
// agent (localhost and 127.0.0.1, a host name and its address), which
// replicaKey cannot see: the agents' instances, random per agent process,
// tell. Taken for two replicas, the file would vote twice and outvote a
// replica that differs, where two that differ must fail the copy. Agent
// names cannot tell (two agents on one host both default to its name). An
// agent that does not answer (down, or older than the instance) is left to
// replicaKey and, for the copy, to the engine, which drops it.
func sameAgentReplicas(ctx context.Context, srcs []Endpoint) error {
	if len(srcs) < 2 {
		return nil // nothing to compare: no round trip to make
	}
	// An agent that does not answer soon is left out of the
	// comparison, not waited for: the stat that follows finds it.
	ask, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	inst := make([]string, len(srcs))
	var wg sync.WaitGroup
	for i, s := range srcs {
		if b, ok := s.Backend.(agentInfoer); ok {
			wg.Go(func() {
				if info, err := b.Info(ask); err == nil {
					inst[i] = info.Instance
				}
			})
		}
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("copyjob: asking the replicas' agents who they are: %w", err)
	}
	seen := map[string]string{}
	for i, s := range srcs {
		if inst[i] == "" {
			continue
		}
		k := inst[i] + path.Clean("/"+s.Path)
		if first, ok := seen[k]; ok {
			return fmt.Errorf("copyjob: %w: replica %s is named twice (also as %s: one agent answers at both)", backend.ErrInvalid, first, s.URL)
		}
		seen[k] = s.URL
	}
	return nil
}

// replicaAnswerTimeout bounds the stat of a replica before the copy (and,
// plus the time to read the file, its checksum): a stopped agent or a
// black-holed host keeps the connection open and never answers, and the
// copy would wait for it for ever. A variable for the tests.
var replicaAnswerTimeout = 60 * time.Second

// checkReplicas stats every replica at once and returns their common
// size; with o.CheckReplicas it also compares their checksums (the
// default algorithm's under checksum none) and returns the majority's
// (else "", and under checksum none). What a
// strict majority of the answering replicas holds is the file: a replica
// of another size (or checksum) is left out of the copy, with the reason
// in drop; with no majority (two replicas that differ, say) the copy is
// refused, since no replica can be trusted over another. A replica that
// cannot be reached is left to the engine (which carries on without it),
// but at least one must answer; one that does not answer at all (within
// replicaAnswerTimeout) is left out.
func checkReplicas(ctx context.Context, srcs []Endpoint, o MultiOptions) (size int64, sum string, drop map[int]string, err error) {
	infos := make([]backend.FileInfo, len(srcs))
	errs := make([]error, len(srcs))
	silent := make([]bool, len(srcs))
	var wg sync.WaitGroup
	for i, s := range srcs {
		wg.Go(func() {
			sctx, cancel := context.WithTimeout(ctx, replicaAnswerTimeout)
			defer cancel()
			infos[i], errs[i] = s.Backend.Stat(sctx, s.Path)
			silent[i] = errs[i] != nil && sctx.Err() != nil && ctx.Err() == nil
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return 0, "", nil, fmt.Errorf("copyjob: stat of the replicas: %w", err)
	}
	drop = map[int]string{}
	var answered []int
	for i, s := range srcs {
		switch {
		case silent[i]:
			// Not waited for again by the engine: the others carry
			// the file.
			drop[i] = fmt.Sprintf("no answer to a stat in %s", replicaAnswerTimeout)
			continue
		case errs[i] != nil:
			continue
		case infos[i].IsDir:
			return 0, "", nil, fmt.Errorf("copyjob: %w: replica %s is a directory: a multi-source copy moves one file", backend.ErrInvalid, s.URL)
		}
		answered = append(answered, i)
	}
	if len(answered) == 0 {
		return 0, "", nil, fmt.Errorf("copyjob: no replica can be read: %w", errors.Join(errs...))
	}
	vals := make([]string, len(srcs)) // per replica: its size, then its checksum
	for _, i := range answered {
		vals[i] = strconv.FormatInt(infos[i].Size, 10)
	}
	common, err := majority(srcs, answered, vals, "size", drop)
	if err != nil {
		return 0, "", nil, err
	}
	size, _ = strconv.ParseInt(common, 10, 64)
	if !o.CheckReplicas {
		return size, "", drop, nil
	}
	// Checksum "none" turns off the copy's verification, not this
	// comparison (--no-replica-check does): without it, replicas of one
	// size that differ would land as one file mixed of both.
	algo := o.Checksum
	if algo == "" || algo == "none" {
		algo = engine.DefaultChecksum
	}
	// A replica computes its checksum by reading its file whole, saying
	// nothing until then: as for GridFTP's and XRootD's, 60 s plus the
	// size at 10 MB/s.
	limit := backend.ReadWait(replicaAnswerTimeout, size, backend.ChecksumRate)
	var kept []int
	for _, i := range answered {
		if _, gone := drop[i]; !gone {
			kept = append(kept, i)
			wg.Go(func() {
				sctx, cancel := context.WithTimeout(ctx, limit)
				defer cancel()
				vals[i], errs[i] = srcs[i].Backend.Checksum(sctx, srcs[i].Path, algo)
				silent[i] = errs[i] != nil && sctx.Err() != nil && ctx.Err() == nil
			})
		}
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return 0, "", nil, fmt.Errorf("copyjob: checksums of the replicas: %w", err)
	}
	var summed []int
	for _, i := range kept {
		switch {
		case errs[i] == nil:
			summed = append(summed, i)
		case silent[i]:
			drop[i] = fmt.Sprintf("no %s checksum in %s", algo, limit)
		}
	}
	if len(summed) == 0 {
		return 0, "", nil, fmt.Errorf("copyjob: no replica could compute its checksum: %w", errors.Join(errs...))
	}
	if sum, err = majority(srcs, summed, vals, algo+" checksum", drop); err != nil {
		return 0, "", nil, err
	}
	if o.Checksum == "none" {
		sum = "" // the copy is not verified: nothing to compare it with
	}
	return size, sum, drop, nil
}

// majority returns the value of what (vals, by replica; of the replicas
// idx) a strict majority of them holds, and records in drop why each
// other one is left out; with no majority it fails, naming every version.
func majority(srcs []Endpoint, idx []int, vals []string, what string, drop map[int]string) (string, error) {
	count := map[string]int{}
	for _, i := range idx {
		count[vals[i]]++
	}
	best := ""
	for v, n := range count {
		if 2*n > len(idx) {
			best = v
		}
	}
	if best == "" {
		var versions []string
		for _, i := range idx {
			versions = append(versions, fmt.Sprintf("%s has %s", srcs[i].URL, vals[i]))
		}
		return "", fmt.Errorf("copyjob: %w: the replicas' %ss differ and no majority agrees (%s): not copies of one file, or cannot tell which is", backend.ErrInvalid, what, strings.Join(versions, ", "))
	}
	for _, i := range idx {
		if vals[i] != best {
			drop[i] = fmt.Sprintf("its %s is %s where %d of %d replicas have %s", what, vals[i], count[best], len(idx), best)
		}
	}
	return best, nil
}

// joinNote joins notes with "; ", skipping empty ones.
func joinNote(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

// equalParts splits size into n parts that differ by at most one byte.
func equalParts(size int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = size / int64(n)
		if int64(i) < size%int64(n) {
			out[i]++
		}
	}
	return out
}

// predictLinks turns the monitor's series into the planner's links: the
// predicted mean and SD of each link's bandwidth over an interval as long
// as the transfer is expected to take (eq. 4: the aggregation degree is
// that time times the sampling frequency; the expected time is the size
// over the links' summed recent means), and the probes' latency.
func predictLinks(mon linkmon.History, srcs []Endpoint, size int64, window int) ([]multisrc.Link, []LinkPlan) {
	series := make([][]float64, len(srcs))
	var sum float64
	for i := range srcs {
		series[i] = mon.Series(i)
		if m, _, ok := forecast.Interval(series[i], len(series[i]), window); ok {
			sum += m
		}
	}
	expected := 1.0
	if sum > 0 {
		expected = float64(size) / sum
	}
	m := forecast.Degree(expected, mon.Hz())
	links := make([]multisrc.Link, len(srcs))
	plans := make([]LinkPlan, len(srcs))
	for i, s := range srcs {
		mean, sd, _ := forecast.Interval(series[i], m, window)
		links[i] = multisrc.Link{Name: s.URL, Mean: mean, SD: sd, Latency: mon.Latency(i)}
		plans[i] = LinkPlan{Source: s.URL, Mean: mean, SD: sd, TF: multisrc.TuningFactor(mean, sd),
			Latency: links[i].Latency, Samples: len(series[i])}
	}
	return links, plans
}
