// Command wanplot draws the plots of bench/transfer-wan.sh: for each
// dataset, each tool's median throughput against the streams it ran with
// (files or partial transfers at once), from the script's per-run lines
// ("DATASET run R TOOL: X MB/s, Y CPU s/GB", its standard error).
//
//	go run ./bench/wanplot -profile wan-untuned -out docs/results/plots wan-untuned.log
//
// Sluice with no flags and the service's job tune their streams as they
// run: they are drawn as horizontal lines at their medians, to be read
// against the fixed settings.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/sluice-dtn/sluice/report"
)

var runLine = regexp.MustCompile(`^(\w+) run \d+ ([\w-]+): ([0-9.]+) MB/s`)

// family and streams of a tool of the script; ok false for a tool drawn
// as a line of its own (tuned as it runs).
func classify(tool string) (family string, streams float64, tuned bool) {
	num := func(prefix string) float64 {
		n, _ := strconv.ParseFloat(strings.TrimPrefix(tool, prefix), 64)
		return n
	}
	switch {
	case tool == "sluice":
		return "sluice, no flags (tuned live)", 0, true
	case tool == "sluice-job":
		return "sluice serve job", 0, true
	case tool == "sluice-sample":
		return "sluice -r --sample", 0, true
	case strings.HasPrefix(tool, "sluice-p"):
		return "sluice --p N", num("sluice-p"), false
	case strings.HasPrefix(tool, "sluice-cc"):
		return "sluice --cc N --pp 32", num("sluice-cc"), false
	case tool == "guc":
		return "globus-url-copy", 1, false
	case strings.HasPrefix(tool, "guc-fast-p"):
		return "globus-url-copy", num("guc-fast-p"), false
	case strings.HasPrefix(tool, "guc-cc"):
		return "globus-url-copy -pp -cc N", num("guc-cc"), false
	case tool == "rclone":
		return "rclone", 4, false
	case tool == "rclone-mts16", tool == "rclone-t16":
		return "rclone", 16, false
	case tool == "aria2c-x16":
		return "aria2c -x16", 16, false
	case tool == "curl":
		return "curl", 1, false
	case tool == "curl-Z":
		return "curl -Z", 50, false
	}
	return tool, 1, false
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func main() {
	profile := flag.String("profile", "", "the profile's name, for titles and file names")
	out := flag.String("out", "docs/results/plots", "directory for the SVG and PNG files")
	flag.Parse()
	if *profile == "" || flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: wanplot -profile NAME [-out DIR] LOG")
		os.Exit(2)
	}
	if err := run(*profile, *out, flag.Arg(0)); err != nil {
		fmt.Fprintln(os.Stderr, "wanplot:", err)
		os.Exit(1)
	}
}

func run(profile, out, log string) error {
	f, err := os.Open(log)
	if err != nil {
		return err
	}
	defer f.Close()
	runs := map[string]map[string][]float64{} // dataset -> tool -> MB/s
	var sets []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := runLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			return fmt.Errorf("%s: %q: %w", log, sc.Text(), err)
		}
		if runs[m[1]] == nil {
			runs[m[1]] = map[string][]float64{}
			sets = append(sets, m[1])
		}
		runs[m[1]][m[2]] = append(runs[m[1]][m[2]], v)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if len(sets) == 0 {
		return fmt.Errorf("%s: no run lines", log)
	}
	for _, d := range sets {
		type pt struct{ x, y float64 }
		fams := map[string][]pt{}
		var order []string
		var tuned []report.Series
		lo, hi := 1.0, 1.0
		for tool, v := range runs[d] {
			fam, n, isTuned := classify(tool)
			if isTuned {
				tuned = append(tuned, report.Series{Name: fam, MBps: []float64{median(v)}})
				continue
			}
			if fams[fam] == nil {
				order = append(order, fam)
			}
			fams[fam] = append(fams[fam], pt{n, median(v)})
			hi = max(hi, n)
		}
		sort.Strings(order)
		var series []report.Series
		for _, s := range tuned {
			s.T = []float64{lo, hi}
			s.MBps = []float64{s.MBps[0], s.MBps[0]}
			series = append(series, s)
		}
		sort.Slice(series, func(i, j int) bool { return series[i].Name < series[j].Name })
		for _, fam := range order {
			ps := fams[fam]
			sort.Slice(ps, func(i, j int) bool { return ps[i].x < ps[j].x })
			s := report.Series{Name: fam}
			for _, p := range ps {
				s.T = append(s.T, p.x)
				s.MBps = append(s.MBps, p.y)
			}
			series = append(series, s)
		}
		name := fmt.Sprintf("transfer-wan-%s-%s", profile, d)
		if err := report.ThroughputVsStreams(out, name, fmt.Sprintf("%s, %s: median MB/s against streams", profile, d), series); err != nil {
			return err
		}
		fmt.Printf("wrote %s/%s.svg\n", out, name)
	}
	return nil
}
