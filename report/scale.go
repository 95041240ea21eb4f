package report

import (
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// CycleSize is the size of the cycle-time chart.
var CycleSize = vg.Point{X: 11 * vg.Inch, Y: 4.8 * vg.Inch}

// CycleTimeBin is the scheduling cycles whose task count fell in
// [Lo, Hi], with the median and 99th percentile of their cycle time in
// milliseconds (sim.CycleBin): wall time, and CPU time when measured
// (zero otherwise).
type CycleTimeBin struct {
	Lo, Hi            int
	Cycles            int64
	Median, P99       float64
	CPUMedian, CPUP99 float64
}

// CycleTimePoint is one sampled cycle: its task count and cycle time in
// milliseconds (CPUMs zero when not measured).
type CycleTimePoint struct {
	Tasks     int
	Ms, CPUMs float64
}

// CyclePanel is one panel of CycleTimeVsTasks: bins and a sample over one
// task count.
type CyclePanel struct {
	// XLabel names the count (queued tasks, queued and running tasks).
	XLabel string
	Bins   []CycleTimeBin
	Sample []CycleTimePoint
}

// zeroAt is where a count of zero is drawn on the logarithmic axis.
const zeroAt = 0.5

// CycleTimeVsTasks draws how a scheduler's cycle time grows with the
// tasks it schedules: per panel, the median and 99th percentile of the
// cycle time per bin of task counts (lines through the bins' geometric
// middles) over a light scatter of sampled cycles, both axes
// logarithmic; a count of 0 is drawn at 0.5. When the bins have CPU
// times, those are drawn solid (and the scatter is of them) and the wall
// times dashed; otherwise the wall times solid. It writes dir/name.svg
// and dir/name.png.
func CycleTimeVsTasks(dir, name, title string, panels []CyclePanel) error {
	if len(panels) == 0 {
		return fmt.Errorf("report: %s: no panels: %w", name, ErrEmpty)
	}
	f := newFigure(title, CycleSize)
	x := func(tasks float64) float64 { return math.Max(tasks, zeroAt) }
	haveCPU := true
	for _, pn := range panels {
		for _, b := range pn.Bins {
			if !(b.CPUMedian > 0 && b.CPUP99 > 0) {
				haveCPU = false
			}
		}
	}
	yLabel := "cycle time, Schedule wall time (ms, log)"
	if haveCPU {
		yLabel = "cycle time of Schedule (ms, log)"
	}
	for k, pn := range panels {
		if len(pn.Bins) == 0 {
			return fmt.Errorf("report: %s: panel %q has no bins: %w", name, pn.XLabel, ErrEmpty)
		}
		p := newPlot("", pn.XLabel+" (log; 0 drawn at 0.5)", yLabel)
		p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
		p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
		if len(pn.Sample) > 0 {
			xys := make(plotter.XYs, 0, len(pn.Sample))
			for _, s := range pn.Sample {
				y := s.Ms
				if haveCPU {
					y = s.CPUMs
				}
				if !finite(y) || y <= 0 || s.Tasks < 0 {
					continue
				}
				xys = append(xys, plotter.XY{X: x(float64(s.Tasks)), Y: y})
			}
			sc, err := plotter.NewScatter(xys)
			if err != nil {
				return fmt.Errorf("report: %s: %w", name, err)
			}
			sc.GlyphStyle.Color = color.Gray{0xb8}
			sc.GlyphStyle.Radius = 1.2
			sc.GlyphStyle.Shape = draw.CircleGlyph{}
			p.Add(sc)
			if k == 0 {
				if haveCPU {
					f.add("sampled cycles (CPU time)", sc)
				} else {
					f.add("sampled cycles", sc)
				}
			}
		}
		var med, p99, cmed, cp99 plotter.XYs
		for _, b := range pn.Bins {
			if !finite(b.Median, b.P99, b.CPUMedian, b.CPUP99) || b.Median <= 0 || b.P99 <= 0 || b.Lo < 0 || b.Hi < b.Lo {
				return fmt.Errorf("report: %s: bin %d-%d: times must be positive numbers", name, b.Lo, b.Hi)
			}
			mid := x(math.Sqrt(float64(b.Lo) * float64(b.Hi)))
			med = append(med, plotter.XY{X: mid, Y: b.Median})
			p99 = append(p99, plotter.XY{X: mid, Y: b.P99})
			cmed = append(cmed, plotter.XY{X: mid, Y: b.CPUMedian})
			cp99 = append(cp99, plotter.XY{X: mid, Y: b.CPUP99})
		}
		type series struct {
			label  string
			xys    plotter.XYs
			col    int
			dashed bool
		}
		ss := []series{{"median per bin", med, 0, false}, {"99th percentile per bin", p99, 1, false}}
		if haveCPU {
			ss = []series{
				{"median per bin, CPU time", cmed, 0, false}, {"99th percentile per bin, CPU time", cp99, 1, false},
				{"median per bin, wall time", med, 0, true}, {"99th percentile per bin, wall time", p99, 1, true},
			}
		}
		for _, s := range ss {
			l, pts, err := plotter.NewLinePoints(s.xys)
			if err != nil {
				return fmt.Errorf("report: %s: %w", name, err)
			}
			l.Color, l.Width = colour(s.col), 1.5
			pts.Color, pts.Shape, pts.Radius = colour(s.col), glyph(s.col), 3
			if s.dashed {
				l.Dashes = []vg.Length{5, 3}
				l.Width = 1
				pts.Radius = 2
			}
			p.Add(l, pts)
			if k == 0 {
				f.add(s.label, l, pts)
			}
		}
		f.panels = append(f.panels, p)
	}
	return f.save(dir, name)
}
