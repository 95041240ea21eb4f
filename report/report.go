// Package report owns the report charts: the SC'15 figures drawn from
// the simulator's and the testbed's results (gonum.org/v1/plot), written
// as SVG and PNG side by side.
//
// ChangeByClass is Figure 3 (% change in average turnaround and slowdown
// per size class, one bar colour per scheduler, relative to a baseline),
// SpareVsSlowdown is Figure 6 (spare bandwidth used by batch tasks against
// the normalised interactive slowdown) and ThroughputOverTime draws
// throughput per endpoint over time. Each takes plain values, writes
// DIR/NAME.svg and DIR/NAME.png (creating DIR when it is missing) and
// nothing else; ChangesFrom and ChangesFromComparison turn sim results
// into Figure 3's rows.
package report

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// DPI is the resolution of the PNG files: a chart of W×H inches is
// W·DPI × H·DPI pixels.
const DPI = 96

// The charts' sizes.
var (
	ChangeSize     = vg.Point{X: 11 * vg.Inch, Y: 4.5 * vg.Inch}
	SpareSize      = vg.Point{X: 8 * vg.Inch, Y: 5 * vg.Inch}
	ThroughputSize = vg.Point{X: 9 * vg.Inch, Y: 4.5 * vg.Inch}
)

// ErrEmpty is returned (wrapped) by the chart functions when they are
// given nothing to draw.
var ErrEmpty = errors.New("nothing to plot")

// palette is the Okabe-Ito colour-blind-safe set, yellow last (it is
// faint on white).
var palette = []color.Color{
	color.RGBA{0x00, 0x72, 0xb2, 0xff}, // blue
	color.RGBA{0xe6, 0x9f, 0x00, 0xff}, // orange
	color.RGBA{0x00, 0x9e, 0x73, 0xff}, // bluish green
	color.RGBA{0xd5, 0x5e, 0x00, 0xff}, // vermillion
	color.RGBA{0x56, 0xb4, 0xe9, 0xff}, // sky blue
	color.RGBA{0xcc, 0x79, 0xa7, 0xff}, // reddish purple
	color.RGBA{0x00, 0x00, 0x00, 0xff}, // black
	color.RGBA{0xf0, 0xe4, 0x42, 0xff}, // yellow
}

func colour(i int) color.Color { return palette[i%len(palette)] }

var glyphs = []draw.GlyphDrawer{
	draw.CircleGlyph{}, draw.BoxGlyph{}, draw.PyramidGlyph{}, draw.RingGlyph{},
	draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.CrossGlyph{}, draw.PlusGlyph{},
}

// glyph varies the shape with the colour's lap, so series beyond the
// palette stay distinct.
func glyph(i int) draw.GlyphDrawer { return glyphs[(i+i/len(palette))%len(glyphs)] }

var sans = font.Font{Typeface: "Liberation", Variant: "Sans"}

func textStyle(size vg.Length) text.Style {
	return text.Style{Color: color.Black, Font: font.From(sans, size), Handler: plot.DefaultTextHandler}
}

// newPlot is a plot in the charts' common style: sans-serif text, a
// light grid, axis labels.
func newPlot(title, xLabel, yLabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font = font.From(sans, 12)
	p.Title.Padding = 6
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = font.From(sans, 11)
		a.Tick.Label.Font = font.From(sans, 10)
	}
	p.X.Label.Text, p.Y.Label.Text = xLabel, yLabel
	p.X.Tick.Marker, p.Y.Tick.Marker = shortTicks{}, shortTicks{}
	p.Legend = plot.NewLegend() // the figure draws one legend beside its panels
	g := plotter.NewGrid()
	g.Vertical.Color = nil
	g.Horizontal.Color = color.Gray{0xdd}
	p.Add(g)
	return p
}

// shortTicks are gonum/plot's default ticks labelled without trailing
// zeros (25, not 25.00).
type shortTicks struct{}

func (shortTicks) Ticks(min, max float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(min, max)
	for i := range ts {
		if v, err := strconv.ParseFloat(ts[i].Label, 64); err == nil && ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(v, 'f', -1, 64)
		}
	}
	return ts
}

// figure is a title over panels side by side (in rows, when rows > 1,
// filled left to right) with one legend on their right.
type figure struct {
	title   string
	panels  []*plot.Plot
	rows    int
	legend  plot.Legend
	size    vg.Point
	entries int
}

func newFigure(title string, size vg.Point) *figure {
	l := plot.NewLegend()
	l.TextStyle = textStyle(11)
	l.Top, l.Left = true, true
	l.Padding = 4
	l.ThumbnailWidth = 18
	return &figure{title: title, legend: l, size: size}
}

func (f *figure) add(name string, thumbs ...plot.Thumbnailer) {
	f.legend.Add(name, thumbs...)
	f.entries++
}

func (f *figure) legendWidth() vg.Length {
	if f.entries == 0 {
		return 0
	}
	// Slack for viewers that render the SVG in a wider font than
	// Liberation Sans (the SVG names its fonts; it does not embed them).
	r := f.legend.Rectangle(draw.Canvas{})
	return (r.Max.X-r.Min.X)*1.2 + 16
}

// panelWidth is about the width of one panel's data area, for sizing bars.
func (f *figure) panelWidth(n int) vg.Length {
	w := (f.size.X - 24 - f.legendWidth()) / vg.Length(n)
	return w - 60 // the y axis, its label and ticks
}

func (f *figure) draw(c draw.Canvas) {
	c.SetColor(color.White)
	c.Fill(c.Rectangle.Path())
	c = draw.Crop(c, 8, -8, 8, -8)
	if f.title != "" {
		sty := textStyle(14)
		sty.XAlign, sty.YAlign = draw.XCenter, draw.YTop
		c.FillText(sty, vg.Point{X: c.Center().X, Y: c.Max.Y}, f.title)
		c.Max.Y -= sty.Rectangle(f.title).Size().Y + 8
	}
	if lw := f.legendWidth(); lw > 0 {
		lc := c
		lc.Min.X = c.Max.X - lw + 12
		lc.Max.Y -= 24 // about level with the panels' data areas
		f.legend.Draw(lc)
		c.Max.X -= lw
	}
	rows := max(f.rows, 1)
	cols := (len(f.panels) + rows - 1) / rows
	w := (c.Max.X - c.Min.X) / vg.Length(cols)
	h := (c.Max.Y - c.Min.Y) / vg.Length(rows)
	for i, p := range f.panels {
		col, row := i%cols, i/cols
		pc := c
		pc.Min.X = c.Min.X + vg.Length(col)*w
		pc.Max.X = pc.Min.X + w
		if col > 0 {
			pc.Min.X += 12
		}
		pc.Max.Y = c.Max.Y - vg.Length(row)*h
		pc.Min.Y = pc.Max.Y - h
		if row > 0 {
			pc.Max.Y -= 12
		}
		p.Draw(pc)
	}
}

// save writes the figure as dir/name.svg and dir/name.png.
func (f *figure) save(dir, name string) error {
	if err := checkOut(dir, name); err != nil {
		return err
	}
	svg := vgsvg.NewWith(vgsvg.UseWH(f.size.X, f.size.Y))
	f.draw(draw.New(svg))
	if err := writeFile(dir, name+".svg", svg); err != nil {
		return err
	}
	img := vgimg.NewWith(vgimg.UseWH(f.size.X, f.size.Y), vgimg.UseDPI(DPI))
	f.draw(draw.New(img))
	return writeFile(dir, name+".png", vgimg.PngCanvas{Canvas: img})
}

func checkOut(dir, name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`) {
		return fmt.Errorf("report: chart name %q: want a plain file name without extension", name)
	}
	if dir == "" {
		return errors.New("report: no output directory")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("report: output directory: %w", err)
	}
	return nil
}

// writeFile writes through a temporary file renamed into place, so a
// failed write leaves no truncated chart behind.
func writeFile(dir, file string, w io.WriterTo) error {
	tmp, err := os.CreateTemp(dir, "."+file+".*")
	if err != nil {
		return fmt.Errorf("report: writing %s: %w", filepath.Join(dir, file), err)
	}
	_, err = w.WriteTo(tmp)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, file))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("report: writing %s: %w", filepath.Join(dir, file), err)
	}
	return nil
}

func finite(xs ...float64) bool {
	for _, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}

// orderOf returns the distinct keys in order of first appearance.
func orderOf(n int, key func(int) string) []string {
	var out []string
	seen := map[string]bool{}
	for i := 0; i < n; i++ {
		if k := key(i); !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}
