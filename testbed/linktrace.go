package testbed

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sluice-dtn/sluice/emul"
)

// Measured link dynamics: instead of an AR(1) process, each emulated link
// plays a measured bandwidth series (docs/results/multisource/traces: FCC
// Measuring Broadband America series), scaled to the link's Table 1 mean and
// keeping the series' own relative variation, one sample per StepSeconds.

// ManifestName is the file in a traces directory that says which series
// drive which link of which configuration.
const ManifestName = "links.tsv"

// LinkTrace is the measured series one link plays.
type LinkTrace struct {
	Link   string    `json:"link"`
	Series []string  `json:"series"` // files under the traces directory, played in order
	Mbps   []float64 `json:"-"`      // the samples, each series scaled to the link's mean, concatenated
	// CV is the coefficient of variation (population SD / mean) of each
	// series as measured, which scaling keeps.
	CV []float64 `json:"cv"`
}

// ScaleSeries multiplies every sample of xs by target / mean(xs), so the
// result has mean target and the coefficient of variation of xs. It
// refuses an empty series, a negative or non-finite sample, a non-positive
// or non-finite target, and a series whose mean is 0 (nothing to scale).
func ScaleSeries(xs []float64, target float64) ([]float64, error) {
	if len(xs) == 0 {
		return nil, errors.New("empty series")
	}
	if !(target > 0) || math.IsInf(target, 0) {
		return nil, fmt.Errorf("target mean %v, want a finite number > 0", target)
	}
	var sum float64
	for i, x := range xs {
		if !(x >= 0) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("sample %d is %v, want a finite bandwidth >= 0", i, x)
		}
		sum += x
	}
	if sum == 0 {
		return nil, errors.New("every sample is 0")
	}
	k := target / (sum / float64(len(xs)))
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = x * k
	}
	return out, nil
}

// readSeries reads one series file: lines "time bandwidth" (whitespace
// separated, bandwidth in Mb/s, the time ignored: samples are played at
// StepSeconds). Blank lines are skipped.
func readSeries(path string) ([]float64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var xs []float64
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) != 2 {
			return nil, fmt.Errorf("%s:%d: %d fields, want time and Mb/s", path, n, len(f))
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil || !(v >= 0) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%s:%d: bandwidth %q, want a finite number >= 0", path, n, f[1])
		}
		xs = append(xs, v)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(xs) < 2 {
		return nil, fmt.Errorf("%s: %d samples, want a series", path, len(xs))
	}
	return xs, nil
}

// LoadLinkTraces reads the series of cfg's links from dir (its
// ManifestName and the files it names), scales each series to its link's
// Table 1 mean and concatenates them per link, in cfg.Links's order. The
// manifest must name every link of cfg once, with cfg's mean and SD (a
// manifest cut for other figures would otherwise drive the links
// silently wrong).
func LoadLinkTraces(dir string, cfg MultiConfig) ([]LinkTrace, error) {
	mpath := filepath.Join(dir, ManifestName)
	data, err := os.ReadFile(mpath)
	if err != nil {
		return nil, fmt.Errorf("link traces: %w", err)
	}
	byLink := map[string]LinkTrace{}
	for n, line := range strings.Split(string(data), "\n") {
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 5 {
			return nil, fmt.Errorf("%s:%d: %d tab-separated fields, want config, link, mean, sd, series", mpath, n+1, len(f))
		}
		if f[0] != cfg.Name {
			continue
		}
		var link *MultiLink
		for i := range cfg.Links {
			if cfg.Links[i].Name == f[1] {
				link = &cfg.Links[i]
			}
		}
		if link == nil {
			return nil, fmt.Errorf("%s:%d: %s has no link %q", mpath, n+1, cfg.Name, f[1])
		}
		if _, dup := byLink[f[1]]; dup {
			return nil, fmt.Errorf("%s:%d: link %s of %s named twice", mpath, n+1, f[1], cfg.Name)
		}
		mean, err1 := strconv.ParseFloat(f[2], 64)
		sd, err2 := strconv.ParseFloat(f[3], 64)
		if err1 != nil || err2 != nil || mean != link.MeanMbps || sd != link.SDMbps {
			return nil, fmt.Errorf("%s:%d: %s %s has mean %s and SD %s, but Table 1 gives %v and %v", mpath, n+1, cfg.Name, f[1], f[2], f[3], link.MeanMbps, link.SDMbps)
		}
		lt := LinkTrace{Link: f[1]}
		for _, s := range strings.Split(f[4], ",") {
			if !filepath.IsLocal(s) {
				return nil, fmt.Errorf("%s:%d: series %q, want a file name under %s", mpath, n+1, s, dir)
			}
			xs, err := readSeries(filepath.Join(dir, s))
			if err != nil {
				return nil, fmt.Errorf("link traces: %w", err)
			}
			scaled, err := ScaleSeries(xs, link.MeanMbps)
			if err != nil {
				return nil, fmt.Errorf("link traces: %s: %w", s, err)
			}
			m, sd := meanPopSD(xs)
			lt.Series = append(lt.Series, s)
			lt.CV = append(lt.CV, sd/m)
			lt.Mbps = append(lt.Mbps, scaled...)
		}
		byLink[f[1]] = lt
	}
	out := make([]LinkTrace, len(cfg.Links))
	for i, l := range cfg.Links {
		lt, ok := byLink[l.Name]
		if !ok {
			return nil, fmt.Errorf("%s: no series for %s link %s", mpath, cfg.Name, l.Name)
		}
		out[i] = lt
	}
	return out, nil
}

// meanPopSD is the mean and population SD (divisor n): a series' own
// variation, as the cut describes it.
func meanPopSD(xs []float64) (mean, sd float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		sd += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(sd / float64(len(xs)))
}

// SlowMbps separates the paper's slow links (the cross-domain ones, 1.5 to
// 3.5 Mb/s in Table 1) from its fast ones (19 Mb/s and up): slow-link drift
// applies to links below it.
const SlowMbps = 5

// Drift is a slow link's level changing between runs, which the paper's
// numbers imply but do not give (docs/results/multisource/README.md, "Run-to-
// run spread"): every Block seconds of the link's clock the whole series is
// multiplied by a new factor 1 + SD·z (z standard normal, at least 0.05).
type Drift struct {
	SD    float64 // relative SD of the level; 0: none
	Block float64 // seconds a level lasts
	Seed  uint64
}

// traceSteps turns a link's samples (Mb/s) into the emulation's outside
// traffic: capacity is the largest sample (after drift), and each step
// leaves the sample's bandwidth free. The samples repeat from the start if
// d seconds outlast them. A 0 Mb/s sample (an outage in the measurement)
// leaves 0.1% of the capacity, the emulation's floor. drift applies to
// the link only if slow.
func traceSteps(mbps []float64, d float64, slow bool, drift Drift, link int) (capacity float64, steps []emul.Step) {
	n := int(math.Ceil(d / StepSeconds))
	xs := make([]float64, n)
	var rng *rand.Rand
	if slow && drift.SD > 0 {
		rng = rand.New(rand.NewPCG(drift.Seed, uint64(300+link)))
	}
	factor, per := 1.0, max(1, int(math.Round(drift.Block/StepSeconds)))
	for i := range xs {
		if rng != nil && i%per == 0 {
			factor = math.Max(0.05, 1+drift.SD*rng.NormFloat64())
		}
		xs[i] = mbps[i%len(mbps)] * factor * BWScale
		capacity = math.Max(capacity, xs[i])
	}
	for i, x := range xs {
		steps = append(steps, emul.Step{At: float64(i) * StepSeconds, Fraction: math.Min(0.999, 1-x/capacity)})
	}
	return capacity, steps
}
