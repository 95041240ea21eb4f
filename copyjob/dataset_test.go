package copyjob

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/agent"
	"github.com/sluice-dtn/sluice/auth"
	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/backend/file"
	"github.com/sluice-dtn/sluice/backend/sluice"
	"github.com/sluice-dtn/sluice/dataset"
	"github.com/sluice-dtn/sluice/emul"
	"github.com/sluice-dtn/sluice/engine"
)

// requestLog records the data requests an agent answered: the paths each
// batch asked for and the files each GET read.
type requestLog struct {
	mu      sync.Mutex
	batches [][]string
	gets    map[string]int // path -> GETs of it (whole or a range)
	sums    map[string]int // path -> checksum requests
	// batchSums: path -> batches asked to send its checksum with it.
	batchSums map[string]int
}

func (l *requestLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/v1/batch":
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var in struct {
				Paths    []string
				Checksum string
			}
			json.Unmarshal(body, &in)
			l.batches = append(l.batches, in.Paths)
			if in.Checksum != "" {
				for _, p := range in.Paths {
					l.batchSums[p]++
				}
			}
		case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/files/"):
			l.gets["/"+strings.TrimPrefix(r.URL.Path, "/v1/files/")]++
		case strings.HasPrefix(r.URL.Path, "/v1/checksum/"):
			l.sums["/"+strings.TrimPrefix(r.URL.Path, "/v1/checksum/")]++
		}
		l.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

// sourceAgent serves dir as an agent whose handler is wrapped by mw (nil:
// none), with emulation emu (nil: none), and returns an endpoint for path
// on it.
func sourceAgent(t *testing.T, dir, p string, emu *emul.Config, mw func(http.Handler) http.Handler) Endpoint {
	t.Helper()
	k := key(t)
	a, err := agent.New(agent.Config{Name: "src", Root: dir, Key: k, Emulation: emu})
	if err != nil {
		t.Fatal(err)
	}
	var h http.Handler = a.Handler()
	if mw != nil {
		h = mw(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	tok, err := auth.Mint(k, auth.Claims{Sub: "test", Scope: auth.ScopeRead, Prefix: "/", Aud: "*", Exp: time.Now().Add(time.Hour).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := sluice.New(srv.URL, tok, nil)
	if err != nil {
		t.Fatal(err)
	}
	return Endpoint{Backend: b, Path: p, URL: "sluice://" + strings.TrimPrefix(srv.URL, "http://") + p, Token: tok}
}

// tree writes files of the given sizes as dir/tree/fNN and returns their
// contents by name.
func tree(t *testing.T, dir string, sizes ...int) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for i, n := range sizes {
		name := fmt.Sprintf("f%02d", i)
		out[name] = writeRandom(t, filepath.Join(dir, "tree", name), n)
	}
	return out
}

// sameTree fails t unless dir holds exactly want, and nothing else (no
// temporary files).
func sameTree(t *testing.T, dir string, want map[string][]byte) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != len(want) {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("%s holds %v, want %d files", dir, names, len(want))
	}
	for name, data := range want {
		sameFile(t, filepath.Join(dir, name), data)
	}
}

func prepare(t *testing.T, src, dst Endpoint, o Options) *Dataset {
	t.Helper()
	o.Recursive = true
	d, err := PrepareDataset(context.Background(), []Endpoint{src}, dst, o)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestPerformOnce: Perform moves every file exactly once and verified,
// with pipelining over batch GETs, with parallelism (split and through
// the engine), and from a source that cannot batch.
func TestPerformOnce(t *testing.T) {
	small := []int{0, 1, 100, 1000, 4000, 10_000, 20_000, 30_000, 70_000, 100_000, 200_000, 300_000, 500_000}
	cases := []struct {
		name      string
		sizes     []int
		pp, p, cc int
		local     bool  // source is a local directory (no batch)
		partMin   int64 // SetPartMin, if not 0
		batches   int   // batch requests expected
		gets      map[string]int
	}{
		{name: "pp 4 cc 2", sizes: small, pp: 4, p: 1, cc: 2, batches: 4},
		{name: "pp 1 cc 1", sizes: small, pp: 1, p: 1, cc: 1, batches: 13},
		{name: "pp 32 cc 16", sizes: small, pp: 32, p: 1, cc: 16, batches: 1},
		// 3 MiB with PartMin 1 MiB (below 2·ChunkMin): three ranges, no
		// journal; the small files still batched.
		{name: "p 3 split", sizes: []int{3 << 20, 10, 20}, pp: 8, p: 3, cc: 2, batches: 1, gets: map[string]int{"/tree/f00": 3}},
		// Parts of at least 2 MiB: the 3 MiB file cannot be split and
		// goes whole, in the batch.
		{name: "p 3 parts too small", sizes: []int{3 << 20, 10, 20}, pp: 8, p: 3, cc: 2, partMin: 2 << 20, batches: 1, gets: map[string]int{"/tree/f00": 0}},
		// 8 MiB with ChunkMin 4 MiB: the engine, two partial transfers.
		{name: "p 2 engine", sizes: []int{8 << 20, 5}, pp: 8, p: 2, cc: 1, batches: 1, gets: map[string]int{"/tree/f00": 2}},
		{name: "local source", sizes: small, pp: 8, p: 1, cc: 4, local: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srcDir, dstDir := t.TempDir(), t.TempDir()
			want := tree(t, srcDir, c.sizes...)
			log := &requestLog{gets: map[string]int{}, sums: map[string]int{}, batchSums: map[string]int{}}
			src := sourceAgent(t, srcDir, "/tree", nil, log.wrap)
			if c.local {
				src = localEP(t, filepath.Join(srcDir, "tree"))
			}
			o := opts(t)
			o.ChunkMin, o.PartMin = 4<<20, 1<<20
			d := prepare(t, src, localEP(t, dstDir+"/"), o)
			d.SetPartMin(c.partMin)
			thr, err := d.Perform(context.Background(), d.Files(), c.pp, c.p, c.cc)
			if err != nil {
				t.Fatal(err)
			}
			if thr <= 0 {
				t.Errorf("throughput %v", thr)
			}
			sameTree(t, filepath.Join(dstDir, "tree"), want)
			if s := d.Summary(); s.Files != len(c.sizes) || s.Retries != 0 || s.Skipped != 0 {
				t.Errorf("summary %+v", s)
			}
			if c.local {
				return
			}
			// Each file asked for exactly once, in one batch or by range.
			asked := map[string]int{}
			for _, b := range log.batches {
				if len(b) > c.pp {
					t.Errorf("a batch of %d files with pp %d", len(b), c.pp)
				}
				for _, p := range b {
					asked[p]++
				}
			}
			if len(log.batches) != c.batches {
				t.Errorf("%d batch requests, want %d", len(log.batches), c.batches)
			}
			for name := range want {
				p := "/tree/" + name
				if n := asked[p] + min(log.gets[p], 1); n != 1 {
					t.Errorf("%s asked for %d times (%d in batches, %d GETs)", p, n, asked[p], log.gets[p])
				}
				if asked[p] > 0 && log.sums[p] > 0 {
					// A request per file for what the batch sends beside
					// the bytes cost a round trip each, and memory.
					t.Errorf("%s came in a batch, and its checksum was asked apart", p)
				}
				if n := log.sums[p] + log.batchSums[p]; n != 1 {
					t.Errorf("%s: the source's checksum asked %d times, want 1", p, n)
				}
			}
			for p, n := range c.gets {
				if log.gets[p] != n {
					t.Errorf("%s: %d range GETs, want %d (p = %d)", p, log.gets[p], n, c.p)
				}
			}
			// Run again: everything is there, nothing is sent.
			d = prepare(t, src, localEP(t, dstDir+"/"), o)
			before := len(log.batches)
			if _, err := d.Perform(context.Background(), d.Files(), c.pp, c.p, c.cc); err != nil {
				t.Fatal(err)
			}
			if s := d.Summary(); s.Skipped != len(c.sizes) || len(log.batches) != before {
				t.Errorf("second run: %+v and %d more batches; want all %d skipped", s, len(log.batches)-before, len(c.sizes))
			}
		})
	}
}

// tamper rewrites the body of each batch response with f.
func tamper(f func([]byte) []byte) func(http.Handler) http.Handler {
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/v1/batch" {
				h.ServeHTTP(w, r)
				return
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			w.Write(f(rec.Body.Bytes()))
		})
	}
}

// TestBatchTampered: a batch answer whose bytes were changed on the way,
// or that ends early, is caught; the file it spoiled never appears at its
// destination path with those bytes, and no temporary file is left
// behind. A batch that keeps failing a file's checksum is moved file by
// file (here the tampering is of batches only, so each file then arrives
// whole).
func TestBatchTampered(t *testing.T) {
	// The batch asks for the largest file first: f02, f01, f00.
	cases := []struct {
		name    string
		f       func([]byte) []byte
		want    error // nil: the files arrive one by one
		spoiled string
	}{
		// The last byte of the last file's data: the line with its
		// checksum follows it.
		{"a byte flipped", func(b []byte) []byte { b[bytes.LastIndex(b, []byte(`{"path"`))-1] ^= 0x55; return b }, nil, "f00"},
		{"cut short", func(b []byte) []byte { return b[:len(b)-100] }, io.ErrUnexpectedEOF, "f00"},
		{"frames dropped", func(b []byte) []byte { return b[:bytes.IndexByte(b, '\n')+1+1000] }, io.ErrUnexpectedEOF, "f02"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srcDir, dstDir := t.TempDir(), t.TempDir()
			want := tree(t, srcDir, 1000, 5000, 8000) // sorted largest first: f02 is the last file of the batch
			src := sourceAgent(t, srcDir, "/tree", nil, tamper(c.f))
			d := prepare(t, src, localEP(t, dstDir+"/"), opts(t))
			_, err := d.Perform(context.Background(), d.Files(), 8, 1, 1)
			if c.want == nil {
				if err != nil {
					t.Fatalf("Perform: %v, want the files moved one by one", err)
				}
				sameTree(t, filepath.Join(dstDir, "tree"), want)
				return
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("Perform: %v, want %v", err, c.want)
			}
			t.Logf("Perform: %v", err)
			if !strings.Contains(err.Error(), "/tree/"+c.spoiled) {
				t.Errorf("the error does not name the spoiled file %s", c.spoiled)
			}
			if _, err := os.Stat(filepath.Join(dstDir, "tree", c.spoiled)); err == nil {
				t.Error("the spoiled file is at its destination path")
			}
			filepath.Walk(dstDir, func(p string, fi os.FileInfo, err error) error {
				if strings.Contains(p, ".sluice-part") {
					t.Errorf("left behind: %s", p)
				}
				return nil
			})
			if s := d.Summary(); s.Retries != lightAttempts-1 {
				t.Errorf("%d retries, want %d", s.Retries, lightAttempts-1)
			}
		})
	}
}

// TestBatchMissingFile: a file that vanished from the source gets an error
// frame; that file is given up (not found is permanent: no retries), the
// other files of the batch still land, and the copy as a whole fails
// naming it.
func TestBatchMissingFile(t *testing.T) {
	srcDir, dstDir := t.TempDir(), t.TempDir()
	want := tree(t, srcDir, 300, 200, 100)
	src := sourceAgent(t, srcDir, "/tree", nil, nil)
	d := prepare(t, src, localEP(t, dstDir+"/"), opts(t))
	os.Remove(filepath.Join(srcDir, "tree/f01"))
	delete(want, "f01")
	sum, err := RunDataset(context.Background(), d, Fixed(d.Files(), 8, 1, 1), nil)
	if err == nil || !strings.Contains(err.Error(), "/tree/f01") || !strings.Contains(err.Error(), "1 files could not be copied") {
		t.Fatalf("copy: %v, want an error naming /tree/f01 alone", err)
	}
	sameTree(t, filepath.Join(dstDir, "tree"), want)
	if sum.Retries != 0 {
		t.Errorf("%d retries of a missing file", sum.Retries)
	}
	if len(sum.Failures) != 1 || !strings.HasSuffix(sum.Failures[0].Src, "/tree/f01") || sum.Files != 2 {
		t.Errorf("summary: %d files, failures %+v; want 2 files and f01 given up", sum.Files, sum.Failures)
	}
}

// TestBatchMissingFiles: files of one batch that vanished after the
// listing are each given up and named, whichever way the batch goes
// (through this process or agent to agent), and however many there are:
// a batch answer that fails one file for good must not drop the files
// after it that were not delivered either (they were neither copied nor
// reported).
func TestBatchMissingFiles(t *testing.T) {
	for _, tc := range []struct {
		name       string
		thirdParty bool
		gone       []string
	}{
		{"one", false, []string{"f01"}},
		{"two", false, []string{"f01", "f03"}},
		{"two third-party", true, []string{"f01", "f03"}},
		{"three third-party", true, []string{"f00", "f02", "f04"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srcDir, dstDir := t.TempDir(), t.TempDir()
			want := tree(t, srcDir, 100, 200, 300, 400, 500)
			src := sourceAgent(t, srcDir, "/tree", nil, nil)
			dst, dstTree := localEP(t, dstDir+"/"), filepath.Join(dstDir, "tree")
			if tc.thirdParty {
				urlB, bB, _ := testAgent(t, dstDir, key(t))
				dst = Endpoint{Backend: bB, Path: "/", URL: urlB + "/", Puller: bB}
			}
			d := prepare(t, src, dst, opts(t))
			for _, name := range tc.gone {
				os.Remove(filepath.Join(srcDir, "tree", name))
				delete(want, name)
			}
			sum, err := RunDataset(context.Background(), d, Fixed(d.Files(), 8, 1, 1), nil)
			if err == nil {
				t.Fatal("copy succeeded, want an error naming the missing files")
			}
			sameTree(t, dstTree, want)
			var failed []string
			for _, f := range sum.Failures {
				failed = append(failed, path.Base(f.Src))
			}
			slices.Sort(failed)
			if !slices.Equal(failed, tc.gone) || sum.Files != len(want) {
				t.Errorf("summary: %d files copied, failures %v; want %d copied and %v given up (error: %v)",
					sum.Files, failed, len(want), tc.gone, err)
			}
		})
	}
}

// TestTreeGoesOnPastBadFiles: unreadable files of a tree are given up, the
// others copied, and the copy fails naming them, in both ways of copying
// a tree (Run and a dataset).
func TestTreeGoesOnPastBadFiles(t *testing.T) {
	for _, dataset := range []bool{false, true} {
		t.Run(fmt.Sprintf("dataset=%v", dataset), func(t *testing.T) {
			srcDir, dstDir := t.TempDir(), t.TempDir()
			want := tree(t, srcDir, 3000, 4000, 5000, 3<<20, 6000)
			src := localEP(t, srcDir+"/tree")
			src.Backend = deniedFiles{src.Backend, []string{"f01", "f03"}}
			delete(want, "f01")
			delete(want, "f03")
			o := opts(t)
			o.Recursive = true
			sum, err := copyTree(t, dataset, src, localEP(t, dstDir+"/"), o)
			if err == nil || !strings.Contains(err.Error(), "2 files could not be copied") {
				t.Fatalf("copy: %v, want an error naming the 2 unreadable files", err)
			}
			sameTree(t, filepath.Join(dstDir, "tree"), want)
			if len(sum.Failures) != 2 || sum.Files != 3 {
				t.Errorf("summary: %d files, failures %+v", sum.Files, sum.Failures)
			}
		})
	}
}

// copyTree copies src to dst in one of the two ways a tree is copied: as a
// dataset (fixed settings: pp 2, p 1, cc 2) or with Run.
func copyTree(t *testing.T, asDataset bool, src, dst Endpoint, o Options) (Summary, error) {
	t.Helper()
	if asDataset {
		d := prepare(t, src, dst, o)
		return RunDataset(context.Background(), d, Fixed(d.Files(), 2, 1, 2), nil)
	}
	return Run(context.Background(), []Endpoint{src}, dst, o, nil)
}

// deniedFiles is a backend that refuses to read the named files.
type deniedFiles struct {
	backend.Backend
	names []string
}

func (b deniedFiles) OpenRange(ctx context.Context, p string, off, n int64) (io.ReadCloser, error) {
	if slices.Contains(b.names, filepath.Base(p)) {
		return nil, fmt.Errorf("open %s: %w", p, backend.ErrPermission)
	}
	return b.Backend.OpenRange(ctx, p, off, n)
}

// TestPipeliningSavesRoundTrips: with an emulated round-trip time, sixteen
// small files in one batch cost about one round trip (their checksums are
// asked for at once), one by one sixteen.
func TestPipeliningSavesRoundTrips(t *testing.T) {
	const rtt = 40 * time.Millisecond
	srcDir := t.TempDir()
	sizes := make([]int, 16)
	for i := range sizes {
		sizes[i] = 1000 + i
	}
	want := tree(t, srcDir, sizes...)
	src := sourceAgent(t, srcDir, "/tree", &emul.Config{RTTMs: float64(rtt / time.Millisecond)}, nil)
	took := map[int]time.Duration{}
	for _, pp := range []int{1, 16} {
		dstDir := t.TempDir()
		d := prepare(t, src, localEP(t, dstDir+"/"), opts(t)) // listing: a few round trips, not timed
		start := time.Now()
		if _, err := d.Perform(context.Background(), d.Files(), pp, 1, 1); err != nil {
			t.Fatal(err)
		}
		took[pp] = time.Since(start)
		sameTree(t, filepath.Join(dstDir, "tree"), want)
		t.Logf("pp %d: %v (%.1f round trips)", pp, took[pp], float64(took[pp])/float64(rtt))
	}
	if took[1] < 16*rtt {
		t.Errorf("16 files one by one took %v, less than 16 round trips", took[1])
	}
	// About one round trip where one by one takes sixteen; bounded by a
	// third of the one-by-one time, measured in the same run, so that a
	// loaded machine (both runs slowed alike) does not fail it.
	if took[16] > 4*rtt && took[16] > took[1]/3 {
		t.Errorf("16 files in one batch took %v, more than 4 round trips and a third of one by one (%v)", took[16], took[1])
	}
}

// TestRunDatasetAuto: the Auto planner through RunDataset moves a small
// dataset from an agent with an emulated WAN to a local directory; the
// steps add up to the dataset.
func TestRunDatasetAuto(t *testing.T) {
	srcDir, dstDir := t.TempDir(), t.TempDir()
	var sizes []int
	for i := range 40 {
		sizes = append(sizes, 1000+(i*7919)%200_000)
	}
	sizes = append(sizes, 3<<20)
	want := tree(t, srcDir, sizes...)
	src := sourceAgent(t, srcDir, "/tree", &emul.Config{RTTMs: 5, ConnBps: 50e6}, nil)
	d := prepare(t, src, localEP(t, dstDir+"/"), opts(t))
	ctx := context.Background()
	rtt, err := d.MeasureRTT(ctx, 3)
	if err != nil || rtt < 5*time.Millisecond || rtt > 50*time.Millisecond {
		t.Errorf("MeasureRTT: %v, %v (emulated 5 ms)", rtt, err)
	}
	bw, err := d.ProbeBandwidth(ctx, 4, 200*time.Millisecond, 0)
	if err != nil || bw <= 0 {
		t.Errorf("ProbeBandwidth: %v, %v", bw, err)
	}
	t.Logf("rtt %v, bandwidth %.1f MB/s", rtt, bw/1e6)
	pl, err := dataset.Auto(d.Files(), rtt, bw)
	if err != nil {
		t.Fatal(err)
	}
	var progressed bool
	sum, err := RunDataset(ctx, d, pl, func(p Progress) { progressed = progressed || p.FilesDone > 0 })
	if err != nil {
		t.Fatal(err)
	}
	sameTree(t, filepath.Join(dstDir, "tree"), want)
	var files int
	for _, s := range sum.Steps {
		files += s.Files
		t.Logf("%s: %d files, pp %d p %d cc %d, %.1f MB/s", s.Phase, s.Files, s.PP, s.P, s.CC, s.Throughput/1e6)
	}
	if files != len(sizes) || sum.Files != len(sizes) || !progressed {
		t.Errorf("steps moved %d files, summary %d, want %d (progress seen: %v)", files, sum.Files, len(sizes), progressed)
	}
}

func TestPerformRefuses(t *testing.T) {
	srcDir, dstDir := t.TempDir(), t.TempDir()
	tree(t, srcDir, 10)
	d := prepare(t, localEP(t, filepath.Join(srcDir, "tree")), localEP(t, dstDir+"/"), opts(t))
	ctx := context.Background()
	if _, err := d.Perform(ctx, d.Files(), 0, 1, 1); err == nil {
		t.Error("pp 0 accepted")
	}
	if _, err := d.Perform(ctx, []dataset.File{{Src: "file:///elsewhere", Dst: "/x", Size: 1}}, 1, 1, 1); err == nil {
		t.Error("a file not of the copy accepted")
	}
	if thr, err := d.Perform(ctx, nil, 1, 1, 1); err != nil || thr != 0 {
		t.Errorf("no files: %v, %v", thr, err)
	}
}

// TestPullBatchThirdParty: agent to agent, small files go in pull batches
// (the destination agent makes one batch GET per pp files, with the
// checksums sent beside the bytes): no GET and no checksum request per
// file, and every file arrives whole, with nothing left behind.
func TestPullBatchThirdParty(t *testing.T) {
	srcDir, dstDir := t.TempDir(), t.TempDir()
	sizes := make([]int, 40)
	for i := range sizes {
		sizes[i] = 1 + i*997
	}
	want := tree(t, srcDir, sizes...)
	log := &requestLog{gets: map[string]int{}, sums: map[string]int{}, batchSums: map[string]int{}}
	src := sourceAgent(t, srcDir, "/tree", nil, log.wrap)
	urlB, bB, _ := testAgent(t, dstDir, key(t))
	dst := Endpoint{Backend: bB, Path: "/arch/", URL: urlB + "/arch/", Puller: bB}
	d := prepare(t, src, dst, opts(t))
	if _, err := d.Perform(context.Background(), d.Files(), 16, 1, 2); err != nil {
		t.Fatal(err)
	}
	sameTree(t, filepath.Join(dstDir, "arch", "tree"), want)
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.batches) != 3 || len(log.gets) != 0 || len(log.sums) != 0 {
		t.Errorf("the source answered %d batches, %d file GETs and %d checksum requests; want 3 batches (40 files, pp 16) and nothing per file",
			len(log.batches), len(log.gets), len(log.sums))
	}
}

// syncLog is a local destination that records its syncs and renames.
type syncLog struct {
	*file.Backend
	mu      sync.Mutex
	synced  map[string]bool // temporary files made durable
	early   []string        // renamed before their bytes were synced
	renamed int
	// syncCalls counts Sync and SyncMany calls.
	syncCalls int
	// syncTime is added to each sync, as a disk's would be (tmpfs syncs
	// in microseconds, and groups then need not form).
	syncTime time.Duration
	// syncErr fails every sync; renameErr fails the renames to a target
	// of that base name.
	syncErr   error
	renameErr map[string]error
}

func (s *syncLog) SyncMany(ctx context.Context, paths []string) error {
	time.Sleep(s.syncTime)
	if s.syncErr != nil {
		return s.syncErr
	}
	s.mu.Lock()
	s.syncCalls++
	for _, p := range paths {
		s.synced[p] = true
	}
	s.mu.Unlock()
	return s.Backend.SyncMany(ctx, paths)
}

func (s *syncLog) Sync(ctx context.Context, p string) error {
	time.Sleep(s.syncTime)
	if s.syncErr != nil {
		return s.syncErr
	}
	s.mu.Lock()
	s.syncCalls++
	s.synced[p] = true
	s.mu.Unlock()
	return s.Backend.Sync(ctx, p)
}

func (s *syncLog) renamedFrom(from string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.synced[from] {
		s.early = append(s.early, from)
	}
	s.renamed++
}

func (s *syncLog) RenameNoSync(ctx context.Context, from, to string) error {
	if err := s.renameErr[filepath.Base(to)]; err != nil {
		return err
	}
	s.renamedFrom(from)
	return s.Backend.RenameNoSync(ctx, from, to)
}

func (s *syncLog) RenameNoReplaceNoSync(ctx context.Context, from, to string) error {
	if err := s.renameErr[filepath.Base(to)]; err != nil {
		return err
	}
	s.renamedFrom(from)
	return s.Backend.RenameNoReplaceNoSync(ctx, from, to)
}

func (s *syncLog) RenameNoReplace(ctx context.Context, from, to string) error {
	if err := s.renameErr[filepath.Base(to)]; err != nil {
		return err
	}
	s.renamedFrom(from)
	return s.Backend.RenameNoReplace(ctx, from, to)
}

func (s *syncLog) Rename(ctx context.Context, from, to string) error {
	if err := s.renameErr[filepath.Base(to)]; err != nil {
		return err
	}
	s.renamedFrom(from)
	return s.Backend.Rename(ctx, from, to)
}

// TestBatchDurableBeforeRename: the small files of a batch from an agent
// are made durable (one sync for the batch) before any is renamed into
// place; a file renamed first could be found empty after a crash, under
// its final name, counted as copied.
func TestBatchDurableBeforeRename(t *testing.T) {
	srcDir, dstDir := t.TempDir(), t.TempDir()
	want := tree(t, srcDir, 10, 200, 3000, 0, 70_000)
	src := sourceAgent(t, srcDir, "/tree", nil, nil)
	fb, err := file.New("/")
	if err != nil {
		t.Fatal(err)
	}
	log := &syncLog{Backend: fb, synced: map[string]bool{}}
	dst := Endpoint{Backend: log, Path: dstDir + "/", URL: "file://" + dstDir + "/"}
	d := prepare(t, src, dst, opts(t))
	if _, err := d.Perform(context.Background(), d.Files(), 8, 1, 1); err != nil {
		t.Fatal(err)
	}
	sameTree(t, filepath.Join(dstDir, "tree"), want)
	if log.renamed != len(want) || len(log.early) > 0 {
		t.Errorf("%d files renamed (want %d); renamed before their bytes were synced: %v", log.renamed, len(want), log.early)
	}
}

// TestWholeFilesDurableBeforeRename: small files copied whole from local
// files (one request each, not a batch) are made durable before they are
// renamed into place, by Run and by a dataset plan alike; and they are
// synced in groups, not one sync per file, which makes small files crawl.
func TestWholeFilesDurableBeforeRename(t *testing.T) {
	for _, tc := range []struct {
		name string
		copy func(t *testing.T, src, dst Endpoint) error
	}{
		{"run", func(t *testing.T, src, dst Endpoint) error {
			o := opts(t)
			o.Recursive = true
			_, err := Run(context.Background(), []Endpoint{src}, dst, o, nil)
			return err
		}},
		{"dataset", func(t *testing.T, src, dst Endpoint) error {
			d := prepare(t, src, dst, opts(t))
			_, err := d.Perform(context.Background(), d.Files(), 8, 1, 4)
			return err
		}},
		{"dataset, files split in parts", func(t *testing.T, src, dst Endpoint) error {
			o := opts(t)
			o.PartMin = 1000 // every file of the tree is split in 2
			d := prepare(t, src, dst, o)
			_, err := d.Perform(context.Background(), d.Files(), 8, 2, 4)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srcDir, dstDir := t.TempDir(), t.TempDir()
			sizes := make([]int, 40)
			for i := range sizes {
				sizes[i] = 1000 + 997*i
			}
			want := tree(t, srcDir, sizes...)
			fb, err := file.New("/")
			if err != nil {
				t.Fatal(err)
			}
			log := &syncLog{Backend: fb, synced: map[string]bool{}, syncTime: 5 * time.Millisecond}
			dst := Endpoint{Backend: log, Path: dstDir + "/", URL: "file://" + dstDir + "/"}
			if err := tc.copy(t, localEP(t, filepath.Join(srcDir, "tree")), dst); err != nil {
				t.Fatal(err)
			}
			sameTree(t, filepath.Join(dstDir, "tree"), want)
			if log.renamed != len(want) || len(log.early) > 0 {
				t.Errorf("%d files renamed (want %d); renamed before their bytes were synced: %v", log.renamed, len(want), log.early)
			}
			if log.syncCalls >= len(want) {
				t.Errorf("%d sync calls for %d files: one per file", log.syncCalls, len(want))
			}
		})
	}
}

// TestWholeFilesLandingFails: a file copied whole that cannot be put in
// place is reported, not counted copied, and leaves nothing behind; a
// rename refused for one file gives that file up and the others land; a
// sync that fails stops the copy with its error and renames nothing.
func TestWholeFilesLandingFails(t *testing.T) {
	for _, tc := range []struct {
		name      string
		syncErr   error
		renameErr map[string]error
		want      string // in the copy's error
		landed    int
	}{
		{"a rename refused", nil, map[string]error{"f03": fmt.Errorf("rename: %w", backend.ErrPermission)}, "permission", 9},
		{"the sync fails", errors.New("input/output error"), nil, "input/output error", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srcDir, dstDir := t.TempDir(), t.TempDir()
			sizes := make([]int, 10)
			for i := range sizes {
				sizes[i] = 5000 + i
			}
			tree(t, srcDir, sizes...)
			fb, err := file.New("/")
			if err != nil {
				t.Fatal(err)
			}
			log := &syncLog{Backend: fb, synced: map[string]bool{}, syncErr: tc.syncErr, renameErr: tc.renameErr}
			dst := Endpoint{Backend: log, Path: dstDir + "/", URL: "file://" + dstDir + "/"}
			o := opts(t)
			o.Recursive = true
			sum, err := Run(context.Background(), []Endpoint{localEP(t, filepath.Join(srcDir, "tree"))}, dst, o, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("copy error %v, want one saying %q", err, tc.want)
			}
			ents, _ := os.ReadDir(filepath.Join(dstDir, "tree"))
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			if len(names) != tc.landed || slices.ContainsFunc(names, func(n string) bool { return strings.HasSuffix(n, ".sluice-part") }) {
				t.Errorf("destination holds %v, want %d files and no temporary one", names, tc.landed)
			}
			if sum.Files > tc.landed {
				t.Errorf("%d files counted copied, %d landed", sum.Files, tc.landed)
			}
		})
	}
}

// removedMidway is a local destination whose directory dir is removed
// before the second write of a range, once the first one was written.
type removedMidway struct {
	*file.Backend
	dir    string
	mu     sync.Mutex
	writes int
}

func (r *removedMidway) before() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.writes++; r.writes == 2 {
		os.RemoveAll(r.dir)
	}
}

func (r *removedMidway) WriteAt(ctx context.Context, p string, off int64, rd io.Reader, n int64) error {
	r.before()
	return r.Backend.WriteAt(ctx, p, off, rd, n)
}

func (r *removedMidway) WriteAtExisting(ctx context.Context, p string, off int64, rd io.Reader, n int64) error {
	r.before()
	return r.Backend.WriteAtExisting(ctx, p, off, rd, n)
}

// TestSplitTempRemoved: the destination directory removed while a file
// moves in parts (without a journal) with checksums off: the parts that
// follow must not make a new temporary file, holes where the earlier
// parts were, and land it as the file.
func TestSplitTempRemoved(t *testing.T) {
	srcDir, dstDir := t.TempDir(), t.TempDir()
	tree(t, srcDir, 3<<20)
	b, err := file.New("/")
	if err != nil {
		t.Fatal(err)
	}
	dst := &removedMidway{Backend: b, dir: filepath.Join(dstDir, "tree")}
	o := opts(t)
	o.Checksum = "none"
	o.ChunkMin, o.PartMin = 4<<20, 1<<20
	d := prepare(t, localEP(t, filepath.Join(srcDir, "tree")), Endpoint{Backend: dst, Path: dstDir + "/", URL: "file://" + dstDir + "/"}, o)
	// One part at a time, so the second write comes after the first.
	_, err = d.Perform(context.Background(), d.Files(), 1, 3, 1)
	if got, rerr := os.ReadFile(filepath.Join(dstDir, "tree", "f00")); rerr == nil {
		t.Fatalf("a file of %d bytes landed with its directory removed midway (Perform: %v)", len(got), err)
	}
	// A file's own failure: given up, and the copy fails naming it.
	if f := d.Summary().Failures; err != nil || len(f) != 1 || !strings.Contains(f[0].Error, "not found") {
		t.Errorf("Perform: %v, failures %+v; want the file given up as not found", err, f)
	}
}

// TestBatchSourceChangedWhileRead: a file rewritten in place while the
// source agent sends it in a batch would land torn (old bytes, then new),
// with a checksum of the bytes sent that matches them. The agent sees its
// modification time move and says so instead of sending the checksum, so
// the torn bytes never land. Through this process, the file is then given
// up as changed since it was listed, and named; agent to agent, it is
// pulled again whole, and lands with its new bytes. The batch's other
// files land either way.
func TestBatchSourceChangedWhileRead(t *testing.T) {
	for _, thirdParty := range []bool{false, true} {
		t.Run(fmt.Sprintf("third-party=%v", thirdParty), func(t *testing.T) {
			srcDir, dstDir := t.TempDir(), t.TempDir()
			// f01 is larger than the agent's read buffer, so that it
			// is read in several pieces.
			want := tree(t, srcDir, 3000, 2<<20, 1000)
			victim := filepath.Join(srcDir, "tree", "f01")
			newer := bytes.Repeat([]byte{'x'}, 2<<20)
			// Listed an hour old: the rewrite is a change since the
			// listing, to the second.
			old := time.Now().Add(-time.Hour)
			if err := os.Chtimes(victim, old, old); err != nil {
				t.Fatal(err)
			}
			// Rewrite f01 in place once its first bytes are sent.
			var header, once sync.Once
			var announced bool
			rewrite := func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path != "/v1/batch" {
						h.ServeHTTP(w, r)
						return
					}
					h.ServeHTTP(&onWrite{ResponseWriter: w, f: func(p []byte) {
						if bytes.Contains(p, []byte(`"path":"/tree/f01","size"`)) {
							header.Do(func() { announced = true })
							return
						}
						if !announced {
							return
						}
						once.Do(func() {
							f, err := os.OpenFile(victim, os.O_WRONLY, 0)
							if err != nil {
								t.Error(err)
								return
							}
							defer f.Close()
							if _, err := f.WriteAt(newer, 0); err != nil {
								t.Error(err)
							}
						})
					}}, r)
				})
			}
			src := sourceAgent(t, srcDir, "/tree", nil, rewrite)
			dst, dstTree := localEP(t, dstDir+"/"), filepath.Join(dstDir, "tree")
			if thirdParty {
				urlB, bB, _ := testAgent(t, dstDir, key(t))
				dst = Endpoint{Backend: bB, Path: "/", URL: urlB + "/", Puller: bB}
			}
			o := opts(t)
			o.ChunkMin = 8 << 20 // f01 goes in the batch
			d := prepare(t, src, dst, o)
			sum, err := RunDataset(context.Background(), d, Fixed(d.Files(), 8, 1, 1), nil)
			if thirdParty {
				if err != nil {
					t.Fatalf("copy: %v, want f01 pulled again whole", err)
				}
				want["f01"] = newer
			} else {
				if !errors.Is(err, engine.ErrSourceChanged) || !strings.Contains(err.Error(), "/tree/f01") {
					t.Fatalf("copy: %v, want the source changed, naming /tree/f01", err)
				}
				delete(want, "f01")
				if len(sum.Failures) != 1 || path.Base(sum.Failures[0].Src) != "f01" || sum.Files != 2 {
					t.Errorf("summary: %d files, failures %+v; want 2 files and f01 given up", sum.Files, sum.Failures)
				}
			}
			sameTree(t, dstTree, want)
		})
	}
}

// onWrite is a ResponseWriter that shows f each write before passing it on.
type onWrite struct {
	http.ResponseWriter
	f func([]byte)
}

func (w *onWrite) Write(p []byte) (int, error) {
	w.f(p)
	return w.ResponseWriter.Write(p)
}

func (w *onWrite) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// TestRewrittenWithinTheSecond: a file rewritten in place while it is
// read, within the second it was listed in, is caught by its modification
// time to the nanosecond: it is given up as changed, never landed torn.
func TestRewrittenWithinTheSecond(t *testing.T) {
	srcDir, dstDir := t.TempDir(), t.TempDir()
	want := tree(t, srcDir, 3000, 200000, 1000)
	victim := filepath.Join(srcDir, "tree", "f01")
	listed := time.Date(2026, 1, 2, 10, 0, 0, 100e6, time.UTC)
	if err := os.Chtimes(victim, listed, listed); err != nil {
		t.Fatal(err)
	}
	delete(want, "f01")
	src := localEP(t, srcDir+"/tree")
	src.Backend = rewriteMidRead{Backend: src.Backend, t: t, path: victim, mtime: listed.Add(100 * time.Millisecond)}
	o := opts(t)
	o.Recursive = true
	sum, err := Run(context.Background(), []Endpoint{src}, localEP(t, dstDir+"/"), o, nil)
	if !errors.Is(err, engine.ErrSourceChanged) || !strings.Contains(err.Error(), "f01") {
		t.Fatalf("copy: %v, want the source changed, naming f01", err)
	}
	sameTree(t, filepath.Join(dstDir, "tree"), want)
	if len(sum.Failures) != 1 || sum.Files != 2 {
		t.Errorf("summary: %d files, failures %+v", sum.Files, sum.Failures)
	}
}

// rewriteMidRead is a backend whose reads of path rewrite it in place
// halfway through, as another writer would, and set its modification time
// to mtime.
type rewriteMidRead struct {
	backend.Backend
	t     *testing.T
	path  string
	mtime time.Time
}

func (b rewriteMidRead) OpenRange(ctx context.Context, p string, off, n int64) (io.ReadCloser, error) {
	rc, err := b.Backend.OpenRange(ctx, p, off, n)
	if err != nil || filepath.Base(p) != filepath.Base(b.path) {
		return rc, err
	}
	half, err := io.ReadAll(io.LimitReader(rc, n/2))
	if err != nil {
		rc.Close()
		return nil, err
	}
	if err := os.WriteFile(b.path, bytes.Repeat([]byte{'x'}, int(off+n)), 0o644); err != nil {
		b.t.Error(err)
	}
	if err := os.Chtimes(b.path, b.mtime, b.mtime); err != nil {
		b.t.Error(err)
	}
	return struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(half), rc), rc}, nil
}

func TestSameMtime(t *testing.T) {
	s := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		a, b time.Time
		want bool
	}{
		{"equal", s.Add(5), s.Add(5), true},
		{"a nanosecond apart", s.Add(5), s.Add(6), false},
		{"whole seconds against finer, same second", s, s.Add(999 * time.Millisecond), true},
		{"finer against whole seconds, same second", s.Add(1), s, true},
		{"whole seconds against finer, next second", s, s.Add(time.Second + 1), false},
		{"unknown", time.Time{}, s.Add(7), true},
	}
	for _, c := range cases {
		if got := sameMtime(c.a, c.b); got != c.want {
			t.Errorf("%s: sameMtime(%v, %v) = %v, want %v", c.name, c.a, c.b, got, c.want)
		}
	}
}

// TestTreeGoesOnPastBadEntries: a tree holding entries that cannot be
// copied (a broken symbolic link, a link to a directory, a named pipe, a
// link out of the source agent's reach) is copied but for them, in both
// ways of copying a tree and from a local or an agent source; the copy
// fails naming each. Before, one such entry failed the whole listing, and
// nothing was copied.
func TestTreeGoesOnPastBadEntries(t *testing.T) {
	for _, tc := range []struct {
		name           string
		dataset, agent bool
	}{
		{"local", false, false},
		{"local dataset", true, false},
		{"agent", false, true},
		{"agent dataset", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srcDir, dstDir := t.TempDir(), t.TempDir()
			want := tree(t, srcDir, 3000, 4000, 3<<20)
			tr := filepath.Join(srcDir, "tree")
			os.MkdirAll(filepath.Join(tr, "sub"), 0o755)
			os.Symlink("nowhere", filepath.Join(tr, "broken"))
			os.Symlink("../sub", filepath.Join(tr, "sub", "dirlink"))
			if err := syscall.Mkfifo(filepath.Join(tr, "pipe"), 0o644); err != nil {
				t.Fatal(err)
			}
			bad := []string{"broken", "sub/dirlink", "pipe"}
			src := localEP(t, tr)
			if tc.agent {
				// The agent's root is the tree: a link up and out of
				// it is beyond its reach.
				os.Symlink("../outside", filepath.Join(tr, "out"))
				os.WriteFile(filepath.Join(srcDir, "outside"), []byte("not the agent's"), 0o644)
				bad = append(bad, "out")
				src = sourceAgent(t, tr, "/", nil, nil)
			}
			o := opts(t)
			o.Recursive = true
			dst := localEP(t, filepath.Join(dstDir, "tree"))
			sum, err := copyTree(t, tc.dataset, src, dst, o)
			if err == nil || !errors.Is(err, backend.ErrInvalid) || !strings.Contains(err.Error(), fmt.Sprintf("%d files could not be copied", len(bad))) {
				t.Fatalf("copy: %v, want an error naming the %d entries that cannot be copied", err, len(bad))
			}
			// sub is there, a directory, empty but for its link.
			if fi, err := os.Stat(filepath.Join(dstDir, "tree", "sub")); err != nil || !fi.IsDir() {
				t.Errorf("sub: %v, want a directory", err)
			}
			ents, _ := os.ReadDir(filepath.Join(dstDir, "tree"))
			if len(ents) != len(want)+1 {
				t.Errorf("the copy holds %d entries, want %d files and sub", len(ents), len(want))
			}
			for name, data := range want {
				sameFile(t, filepath.Join(dstDir, "tree", name), data)
			}
			var failed []string
			for _, f := range sum.Failures {
				_, rest, _ := strings.Cut(strings.TrimPrefix(f.Src, "sluice://"), "/tree/")
				if tc.agent {
					_, rest, _ = strings.Cut(strings.TrimPrefix(f.Src, "sluice://"), "/")
				}
				failed = append(failed, rest)
			}
			slices.Sort(failed)
			slices.Sort(bad)
			if !slices.Equal(failed, bad) || sum.Files != len(want) {
				t.Errorf("summary: %d files copied, failures %v; want %d copied and %v given up", sum.Files, failed, len(want), bad)
			}
			if tc.agent && (strings.Contains(err.Error(), "not the agent's") || strings.Contains(err.Error(), srcDir)) {
				t.Errorf("the error tells of what is out of reach: %v", err)
			}
		})
	}
}

// TestResumeLeavesPresentFilesOutOfThePlan: a dataset copy resumed with
// some files already in place (same size, same checksum) plans only the
// others: the present ones are checked while the copy is prepared and
// counted skipped, so no chunk's throughput counts bytes that did not
// move (the planners chose settings from such throughputs: 218 MB/s at
// cc 1 where 102 moved). A file of the same size but other bytes is
// copied again, with Overwrite (without it, it is given up: see
// TestRerunIsIdempotent).
func TestResumeLeavesPresentFilesOutOfThePlan(t *testing.T) {
	srcDir, dstDir := t.TempDir(), t.TempDir()
	want := tree(t, srcDir, 1000, 2000, 3000, 4000, 5000, 6000)
	for _, name := range []string{"f00", "f02", "f04"} {
		if err := os.MkdirAll(filepath.Join(dstDir, "tree"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dstDir, "tree", name), want[name], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Same size, other bytes: not in place.
	os.WriteFile(filepath.Join(dstDir, "tree", "f01"), bytes.Repeat([]byte{'z'}, 2000), 0o644)
	o := opts(t)
	o.Recursive, o.Overwrite = true, true
	d := prepare(t, localEP(t, filepath.Join(srcDir, "tree")), localEP(t, dstDir+"/"), o)
	var left []string
	var bytes int64
	for _, f := range d.Files() {
		left = append(left, path.Base(f.Src))
		bytes += f.Size
	}
	if slices.Sort(left); !slices.Equal(left, []string{"f01", "f03", "f05"}) {
		t.Errorf("planned %v, want f01, f03 and f05 (the others are in place)", left)
	}
	if s := d.Summary(); s.Skipped != 3 {
		t.Errorf("%d skipped before the copy, want 3", s.Skipped)
	}
	rep, err := dataset.Run(context.Background(), Fixed(d.Files(), 8, 1, 2), d)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Bytes() != bytes {
		t.Errorf("the steps moved %d bytes, want %d (the files not in place)", rep.Bytes(), bytes)
	}
	sameTree(t, filepath.Join(dstDir, "tree"), want)
}
