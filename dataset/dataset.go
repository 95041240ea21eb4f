// Package dataset owns the operations on a dataset transfer that the
// flexible GridFTP client of Yildirim ("A Flexible GridFTP Client for
// Implementation of Intelligent Cloud Data Scheduling Services", SC'13)
// offers, and the scheduling algorithms built on them:
//
//   - list_files: List walks a backend recursively and returns every file
//     with its size;
//   - sort, divide, combine and group: SortBySize, Divide, DivideBy,
//     SplitLargest, Combine and GroupByPair rearrange files into chunks,
//     each chunk carrying the pipelining (pp), parallelism (p) and
//     concurrency (cc) it is to be moved with;
//   - enqueue and dequeue: Queue holds the chunks of a running job;
//   - perform_transfer: the Performer interface, implemented by whoever
//     moves bytes (the service, `sluice cp -r`), reports the throughput of
//     one chunk;
//   - Algorithm 1 (Adaptive_CC): AdaptiveCC and the Adaptive planner;
//   - Algorithm 2 (Optimal_PP): OptimalPP, with BDP;
//   - Algorithm 3 (Optimal_CC) and its extension to files larger than the
//     BDP (parallelism first, then concurrency): OptimalCC, and Auto, which
//     builds it from a measured RTT and bandwidth. OptimalCC departs from
//     the paper in three documented ways that Params can turn off: a
//     margin a higher level must beat, a floor under each phase's sampling
//     budget, and the files above the BDP starting their search at the
//     concurrency measured for those below it.
//
// Beside the planners, Hill is a Tuner: the live counterpart that moves the
// number of streams of a running transfer window by window, instead of
// sampling chunk by chunk (each sample on a WAN path pays TCP's ramp-up
// and a drained tail).
//
// The planners are pure state machines: no clock, no I/O, no goroutines.
// A planner proposes the next chunk to transfer (Next), the caller moves it
// and reports the throughput it measured (Observe). Run is the small driver
// that connects a planner to a Performer. Only Queue is safe for concurrent
// use.
package dataset

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"strings"

	"github.com/sluice-dtn/sluice/backend"
)

// ErrInvalid marks bad input to this package: negative sizes, parameters
// out of range. Functions wrap it with what was wrong.
var ErrInvalid = errors.New("dataset: invalid input")

// File is one file of a dataset: the paper's globus_file_t. Whether the
// paths are absolute or relative to some root is the caller's choice; this
// package only carries them.
type File struct {
	Src  string `json:"src"`
	Dst  string `json:"dst"`
	Size int64  `json:"size"`
}

// Chunk is a group of files moved together by one perform_transfer with
// the same settings: PP files in flight back to back on each channel
// (pipelining), P streams per file (parallelism) and CC channels at once
// (concurrency).
type Chunk struct {
	Files     []File
	PP, P, CC int
}

// Len is the number of files in the chunk.
func (c Chunk) Len() int { return len(c.Files) }

// Size is the total size of the chunk's files in bytes.
func (c Chunk) Size() int64 {
	var n int64
	for _, f := range c.Files {
		n += f.Size
	}
	return n
}

// MeanSize is the mean file size in bytes, rounded down (0 for an empty
// chunk).
func (c Chunk) MeanSize() int64 {
	if len(c.Files) == 0 {
		return 0
	}
	return c.Size() / int64(len(c.Files))
}

// String describes the chunk for messages.
func (c Chunk) String() string {
	return fmt.Sprintf("%d files, %d bytes, pp=%d p=%d cc=%d", len(c.Files), c.Size(), c.PP, c.P, c.CC)
}

// sameSettings reports whether two chunks are moved the same way.
func (c Chunk) sameSettings(d Chunk) bool { return c.PP == d.PP && c.P == d.P && c.CC == d.CC }

// checkFiles refuses sizes the algorithms cannot reason about: negative
// sizes, and totals that overflow int64.
func checkFiles(files []File) error {
	var total int64
	for _, f := range files {
		if f.Size < 0 {
			return fmt.Errorf("%w: %s has negative size %d", ErrInvalid, f.Src, f.Size)
		}
		if total > math.MaxInt64-f.Size {
			return fmt.Errorf("%w: total size overflows int64", ErrInvalid)
		}
		total += f.Size
	}
	return nil
}

// List is the paper's list_files: it returns every file below root on b
// (all levels, directories left out) with its size, sorted by Src. Src is
// root joined with the file's path below root, as b names it; Dst is the
// path below root, for the caller to place under its destination. If root
// is a file, List returns just that file, with Dst its base name.
func List(ctx context.Context, b backend.Backend, root string) ([]File, error) {
	fi, err := b.Stat(ctx, root)
	if err != nil {
		return nil, fmt.Errorf("dataset: listing %s: %w", root, err)
	}
	if !fi.IsDir {
		if fi.Size < 0 {
			return nil, fmt.Errorf("%w: %s has negative size %d", ErrInvalid, root, fi.Size)
		}
		return []File{{Src: root, Dst: path.Base(root), Size: fi.Size}}, nil
	}
	// Backend.List is recursive on request; entries are named like Stat
	// names root, so the part below root is what follows its path (the
	// same rule copyjob's plan uses).
	list, err := b.List(ctx, root, true)
	if err != nil {
		return nil, fmt.Errorf("dataset: listing %s: %w", root, err)
	}
	base := strings.TrimSuffix(fi.Path, "/")
	var out []File
	for _, e := range list {
		if e.Err != "" {
			return nil, fmt.Errorf("%w: %s: %s", ErrInvalid, e.Path, e.Err)
		}
		if e.IsDir {
			continue
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(e.Path, base), "/")
		if rel == "" {
			return nil, fmt.Errorf("dataset: listing %s: entry %q is not below it", root, e.Path)
		}
		if e.Size < 0 {
			return nil, fmt.Errorf("%w: %s has negative size %d", ErrInvalid, e.Path, e.Size)
		}
		out = append(out, File{Src: path.Join(root, rel), Dst: rel, Size: e.Size})
	}
	slices.SortFunc(out, func(a, b File) int { return strings.Compare(a.Src, b.Src) })
	return out, nil
}

// SortBySize sorts files in place by ascending size, ties by Src then Dst,
// so that every later division is deterministic whatever order the
// listing came in.
func SortBySize(files []File) {
	slices.SortStableFunc(files, func(a, b File) int {
		if c := cmp.Compare(a.Size, b.Size); c != 0 {
			return c
		}
		if c := strings.Compare(a.Src, b.Src); c != 0 {
			return c
		}
		return strings.Compare(a.Dst, b.Dst)
	})
}

// Divide cuts files, in order, into n chunks whose numbers of files differ
// by at most one, with pp, p and cc 1. n is clamped to [1, len(files)], so
// no chunk is empty; no files give no chunks.
func Divide(files []File, n int) []Chunk {
	if len(files) == 0 {
		return nil
	}
	n = min(max(n, 1), len(files))
	out := make([]Chunk, 0, n)
	start := 0
	for i := range n {
		// The first len%n chunks take one file more.
		end := start + len(files)/n
		if i < len(files)%n {
			end++
		}
		out = append(out, plain(files[start:end]))
		start = end
	}
	return out
}

// DivideBy cuts files, in order, into chunks of perChunk files (the last
// may be smaller), with pp, p and cc 1: the division of the paper's
// Algorithm 1. perChunk below 1 counts as 1.
func DivideBy(files []File, perChunk int) []Chunk {
	perChunk = max(perChunk, 1)
	var out []Chunk
	for start := 0; start < len(files); start += perChunk {
		out = append(out, plain(files[start:min(start+perChunk, len(files))]))
	}
	return out
}

// plain is a chunk of a private copy of files with pp, p and cc 1. The
// copy keeps an append to one chunk from writing into the caller's slice
// or into the next chunk.
func plain(files []File) Chunk {
	return Chunk{Files: slices.Clone(files), PP: 1, P: 1, CC: 1}
}

// SplitLargest is Algorithm 3's "divide the largest chunk until there are
// enough chunks": while there are fewer than n chunks, it halves the
// largest chunk (in bytes, first on ties) by bytes, both halves keeping its
// settings and file order. Chunks of one file cannot be halved; when only
// those are left it stops with fewer than n. The input is not modified.
func SplitLargest(chunks []Chunk, n int) []Chunk {
	out := make([]Chunk, len(chunks))
	for i, c := range chunks {
		c.Files = slices.Clone(c.Files)
		out[i] = c
	}
	for len(out) < n {
		big := -1
		var bigSize int64
		for i, c := range out {
			if s := c.Size(); len(c.Files) > 1 && (big < 0 || s > bigSize) {
				big, bigSize = i, s
			}
		}
		if big < 0 {
			break
		}
		c := out[big]
		// Cut after the file that brings the first half to half the
		// bytes, but leave at least one file on each side.
		k, acc := 1, c.Files[0].Size
		for k < len(c.Files)-1 && acc < bigSize-acc {
			acc += c.Files[k].Size
			k++
		}
		left, right := c, c
		left.Files = c.Files[:k:k]
		right.Files = c.Files[k:]
		out = slices.Insert(slices.Delete(out, big, big+1), big, left, right)
	}
	return out
}

// Combine merges chunks that have equal pp, p and cc into one, in the
// order each setting first appears, the files in chunk order; empty chunks
// are dropped. It is how the rest of a dataset is sent as few transfers as
// possible once the settings are chosen. The input is not modified.
func Combine(chunks []Chunk) []Chunk {
	var out []Chunk
	for _, c := range chunks {
		if len(c.Files) == 0 {
			continue
		}
		i := slices.IndexFunc(out, c.sameSettings)
		if i < 0 {
			out = append(out, Chunk{Files: slices.Clone(c.Files), PP: c.PP, P: c.P, CC: c.CC})
			continue
		}
		out[i].Files = append(out[i].Files, c.Files...)
	}
	return out
}

// Group is the files that go from one source to one destination.
type Group struct {
	Src, Dst string
	Files    []File
}

// GroupByPair groups files by the source-destination pair key returns
// (for example the hosts of their URLs), groups in the order their pair
// first appears, files in input order. A nil key groups by the pair of
// parent directories.
func GroupByPair(files []File, key func(File) (src, dst string)) []Group {
	if key == nil {
		key = func(f File) (string, string) { return path.Dir(f.Src), path.Dir(f.Dst) }
	}
	var out []Group
	index := map[[2]string]int{}
	for _, f := range files {
		s, d := key(f)
		i, ok := index[[2]string{s, d}]
		if !ok {
			i = len(out)
			index[[2]string{s, d}] = i
			out = append(out, Group{Src: s, Dst: d})
		}
		out[i].Files = append(out[i].Files, f)
	}
	return out
}
