package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sluice-dtn/sluice/backend"
)

// Defaults applied by Start to zero fields of a Spec.
const (
	DefaultChunkMin        = 8 << 20 // above a WAN bandwidth-delay product (10 Gb/s × 6 ms)
	DefaultSubWrite        = 4 << 20 // bounds the bytes lost per worker at an interruption
	DefaultChecksum        = "adler32"
	DefaultCheckpointEvery = time.Second // SC'15 §4.5
	DefaultAttempts        = 8
	DefaultBackoffBase     = 200 * time.Millisecond
	DefaultBackoffMax      = 10 * time.Second
)

// Errors of the engine itself; backend errors keep their own sentinels
// (backend.ErrNoSpace, ...), visible through errors.Is.
var (
	// ErrSourceChanged: the source's size or modification time changed
	// since the transfer (or the caller's Stat) started.
	// It is backend.ErrChanged, so a backend's report of a file that
	// changed while it was read is this error too.
	ErrSourceChanged = backend.ErrChanged
	// ErrChecksum: the checksums of source and destination disagree (also
	// after one retry from scratch), or the source's differs from
	// Spec.Expected.
	ErrChecksum = errors.New("checksum mismatch")
	// ErrFinished: Pause was called on a transfer that has already ended.
	ErrFinished = errors.New("transfer already finished")
	// ErrFenced: a Journals.Save error that wraps it stops the transfer
	// (with that error) instead of being noted and retried at the next
	// checkpoint: the caller no longer owns the file (the service's
	// fencing, when another server took the task over).
	ErrFenced = errors.New("no longer allowed to write this transfer")
	// ErrDestinationExists: Spec.NoReplace is set and something (a
	// file, a directory) is at the destination path. It wraps
	// backend.ErrExist. Not retried: the file there stays.
	ErrDestinationExists error = destinationExists{}
)

type destinationExists struct{}

func (destinationExists) Error() string        { return "destination exists" }
func (destinationExists) Is(target error) bool { return target == backend.ErrExist }

// PullFunc has the destination fetch [off, off+n) of srcPath from the
// source and write it at the same offset of dstPath (Spec.Pull). If the
// destination reports its progress, progress is called with the bytes
// written so far from off, increasing, from the calling goroutine before
// PullFunc returns: the engine records them as they land, so that a
// request can be long (a round trip per request is a stream's idle time)
// while what the transfer has moved is still seen as it moves.
type PullFunc func(ctx context.Context, srcPath, dstPath string, off, n int64, progress func(written int64)) error

// Source is one replica of the file in a multi-source transfer
// (Spec.Sources): where it is, how its bytes reach the destination, and
// the part of the file it is planned to send.
type Source struct {
	// Name names the replica in notes and errors (default: Path).
	Name    string
	Backend backend.Backend
	Path    string
	// Pull, if set, is Spec.Pull for this replica.
	Pull PullFunc
	// Share is the replica's part of the bytes still to copy, as a
	// multisrc policy planned it; shares are normalised, and all zero
	// means equal parts. A replica with Share 0 among others sends
	// nothing unless it steals (Spec.Steal) or another replica fails.
	Share float64
	// Rate is the replica's rate as the plan predicted it, bytes/s (0:
	// unknown). Stealing weighs a replica by what it has delivered; one
	// that has delivered nothing yet (a replica planned no bytes, say)
	// counts at this rate rather than as fast as the others, which made
	// a slow replica take half of a fast one's work.
	Rate float64
}

// Spec describes one file transfer.
type Spec struct {
	Src     backend.Backend
	SrcPath string
	Dst     backend.Backend
	DstPath string
	// Size is the source's size from the caller's Stat; the engine Stats
	// again and fails with ErrSourceChanged if they differ. -1: unknown,
	// take the engine's Stat.
	Size int64
	// CC is the number of partial transfers in flight at once; 0 means 1.
	// SetCC changes it while the transfer runs.
	CC int
	// ChunkMin is the smallest partial transfer (default DefaultChunkMin).
	ChunkMin int64
	// Pull, if set, moves each sub-write without the data passing
	// through this process: the destination fetches [off, off+n) of
	// srcPath from the source and writes it at the same offset of
	// dstPath (third-party copy, as HTTP-TPC and GridFTP do). Src is then
	// used only for Stat and Checksum.
	Pull PullFunc
	// WholePull says Pull copies only whole files: a server-to-server
	// copy that cannot copy ranges (XRootD's). The transfer then makes
	// one Pull of [0, size) with one worker whatever CC says, and never
	// resumes from a journal (a partial copy cannot be continued: it
	// starts over).
	WholePull bool
	// whole: the file moves in one step, pulled whole (WholePull) or
	// written whole to a backend.WholeWriter (wholeDst), which is not
	// allocated first. Set by normalize.
	whole, wholeDst bool
	// PullMin, if set, is the least one Pull asks for (but what is left
	// of its piece): the cost of one request where each Pull is a login
	// and a new data connection at a storage server, not one round trip
	// on a connection kept open. The end of a copy then shrinks its
	// pulls, and idle workers split pieces, down to this, not to a few
	// hundred KiB.
	PullMin int64
	// SubWrite is the most bytes one WriteAt carries (default
	// DefaultSubWrite): the unit of progress the journal can record.
	SubWrite int64
	// Checksum is one of backend.Algorithms or "none" (default adler32).
	Checksum string
	// Expected, if set, is the checksum (hex) the user expects of the file.
	Expected string
	// Tag, if set, is part of the temporary file's name (TempNameFor):
	// a service running several transfers to one destination path gives
	// each its own, so they never write into one file.
	Tag string
	// Journal names the checkpoint journal (required): with the default
	// Journals, a local path whose directory is created if needed.
	Journal string
	// Journals keeps the journal (default FileJournals).
	Journals Journals
	// KeepJournal leaves the journal in place after the final rename, for
	// a caller that deletes it only once it has durably recorded the
	// completion: a crash in between then finds a complete journal and
	// can tell that the file need not be copied again.
	KeepJournal bool
	// CheckpointEvery is the longest time between journal writes while
	// bytes move (default 1 s).
	CheckpointEvery time.Duration
	// Durable syncs the destination before each checkpoint so that the
	// journal survives a crash of the destination host, not only of this
	// process.
	Durable bool
	// Retry governs retries of transient errors.
	Retry RetryPolicy
	// Sources, instead of Src, SrcPath and Pull, are replicas of one file
	// to read at once (a multi-source download): each gets a contiguous
	// part of the missing bytes in proportion to its Share, and CC
	// workers of its own. Their sizes must agree. A replica that keeps
	// failing (Retry.Attempts in a row) is dropped and its bytes go to
	// the others; the transfer fails only when every replica has. The
	// journal, the checksum (against the first replica that is still
	// used) and the final rename are as for one source; when the
	// checksums disagree and the backends can sum byte ranges
	// (backend.RangeChecksummer), the replica whose ranges differ is
	// dropped and its ranges are fetched again from the others.
	Sources []Source
	// Steal lets a replica that has sent its part take over the tail of
	// the one expected to finish last (multisrc.Steal: both then finish
	// together at their observed rates), so that a replica that slows
	// down or stalls does not hold the file back.
	Steal bool
	// Witness, with several replicas and no Expected, also sums a second
	// replica still used, whole, at verification (at the same time as the
	// first): the file is checked against the first, so a first replica
	// whose own bytes are wrong where it sent them would agree with it.
	// When the two disagree, the replicas vote on range checksums (see
	// Sources) before anything is put in place.
	Witness bool

	// NoReplace keeps a file already at DstPath: the transfer fails with
	// ErrDestinationExists, before any byte moves if it is there at the
	// start, and at the final rename if it appeared meanwhile (the rename
	// itself refuses to replace it, with a backend.NoReplaceRenamer; a
	// destination backend without one is stat'ed just before a plain
	// Rename, which leaves a short race). Unset, the final rename
	// replaces the destination (the engine's temporary file is always
	// replaced or reused, whatever this says).
	NoReplace bool
	// PreserveModTime gives the file the source's modification time
	// (as it was when the transfer prepared) before the final rename,
	// where the destination can set it (backend.ModTimeSetter); where
	// it cannot, the result's note says so and the file keeps the time
	// of its copy.
	PreserveModTime bool

	// Commit, if set, is called after the file is verified and before it
	// is renamed into place; an error stops the transfer there, with the
	// verified temporary file and the journal kept for a later run. A
	// service uses it to check that it still has the right to finish this
	// file (see server: a scheduler that lost its partition to another
	// server must not put the file in place too).
	Commit func(ctx context.Context) error

	// Begin, if set, is called once the source is known and before the
	// transfer touches the destination or its journal; an error stops it
	// there. A service uses it as Commit: a scheduler paused past its
	// lease must not, on waking, remove or recreate a temporary file the
	// new owner is writing, or has already renamed into place.
	Begin func(ctx context.Context) error
}

// RetryPolicy is exponential backoff with deterministic jitter.
type RetryPolicy struct {
	// Attempts is how many times a chunk (or a single operation such as
	// Stat or Checksum) is tried in a row without progress before the
	// transfer fails (default 8).
	Attempts int
	// Base and Max bound the backoff: the n-th retry waits between half
	// and all of min(Max, Base·2^(n-1)) (defaults 200 ms and 10 s).
	Base, Max time.Duration
	// Seed makes the jitter reproducible.
	Seed int64
}

// TempName is the temporary name the engine writes dstPath under: a hidden
// file in the same directory, so that the final rename stays within one
// directory (and one file system).
func TempName(dstPath string) string { return TempNameFor(dstPath, "") }

// maxName is the longest file name most file systems take (NAME_MAX).
const maxName = 255

// TempNameFor is TempName for one of several writers of dstPath: tag (a
// task's ID, say) goes into the name, so two transfers to one destination
// never write into each other's temporary file; each puts a whole,
// verified file in place and the last rename wins (with Spec.NoReplace,
// the first, and the others fail with ErrDestinationExists). A temporary name that
// would pass 255 bytes keeps the start of the file's name and a hash of
// the rest, so every name a file system takes can be written.
func TempNameFor(dstPath, tag string) string {
	dir, name := path.Split(dstPath)
	suffix := ".sluice-part"
	if tag != "" {
		suffix = "." + tag + suffix
	}
	if 1+len(name)+len(suffix) > maxName {
		sum := sha256.Sum256([]byte(name))
		h := "~" + hex.EncodeToString(sum[:6])
		keep := max(maxName-1-len(suffix)-len(h), 0)
		for keep > 0 && !utf8.RuneStart(name[keep]) {
			keep-- // cut between characters, not inside one
		}
		name = name[:keep] + h
	}
	return dir + "." + name + suffix
}

// normalize checks a Spec and fills in defaults.
func (s Spec) normalize() (Spec, error) {
	bad := func(format string, a ...any) (Spec, error) {
		return s, fmt.Errorf("engine: %w: "+format, append([]any{backend.ErrInvalid}, a...)...)
	}
	if len(s.Sources) > 0 {
		if s.Src != nil || s.SrcPath != "" || s.Pull != nil {
			return bad("give either Src, SrcPath and Pull or Sources, not both")
		}
		for i, r := range s.Sources {
			switch {
			case r.Backend == nil || r.Path == "":
				return bad("source %d has no backend or path", i)
			case math.IsNaN(r.Share) || math.IsInf(r.Share, 0) || r.Share < 0:
				return bad("source %d (%s) has share %v; want a finite share >= 0", i, r.Path, r.Share)
			case math.IsNaN(r.Rate) || math.IsInf(r.Rate, 0) || r.Rate < 0:
				return bad("source %d (%s) has rate %v; want a finite rate >= 0", i, r.Path, r.Rate)
			}
		}
		s.Sources = slices.Clone(s.Sources)
		for i := range s.Sources {
			if s.Sources[i].Name == "" {
				s.Sources[i].Name = s.Sources[i].Path
			}
		}
		// The first replica stands for the file where one is needed: the
		// journal names it, and it is stat'ed and summed first.
		s.Src, s.SrcPath, s.Pull = s.Sources[0].Backend, s.Sources[0].Path, s.Sources[0].Pull
	}
	switch {
	case s.Src == nil || s.Dst == nil:
		return bad("source and destination backends are required")
	case s.SrcPath == "" || s.DstPath == "":
		return bad("source and destination paths are required")
	case strings.HasSuffix(s.DstPath, "/") || path.Base(s.DstPath) == "." || path.Base(s.DstPath) == "/":
		return bad("destination %q names a directory, not a file", s.DstPath)
	case s.Journal == "":
		return bad("a journal path is required")
	case s.Size < -1:
		return bad("size %d", s.Size)
	case s.CC < 0:
		return bad("concurrency %d", s.CC)
	case s.ChunkMin < 0 || s.SubWrite < 0 || s.CheckpointEvery < 0:
		return bad("negative chunk, sub-write or checkpoint setting")
	case s.Retry.Attempts < 0 || s.Retry.Base < 0 || s.Retry.Max < 0:
		return bad("negative retry setting")
	case s.PullMin < 0:
		return bad("negative PullMin")
	case s.WholePull && (s.Pull == nil || len(s.Sources) > 0):
		return bad("WholePull needs Pull and one source")
	}
	_, s.wholeDst = s.Dst.(backend.WholeWriter)
	if s.wholeDst && len(s.Sources) > 1 {
		return bad("a destination that writes only whole files takes one source")
	}
	if s.whole = s.WholePull || s.wholeDst; s.whole {
		// One piece, one step: the file is the unit. (Above any file a
		// backend takes, 2^60, and small enough that twice it, the
		// steal threshold, does not overflow.)
		s.CC, s.ChunkMin, s.SubWrite = 1, 1<<61, 1<<61
	}
	if s.CC == 0 {
		s.CC = 1
	}
	if s.Journals == nil {
		s.Journals = FileJournals{}
	}
	if s.ChunkMin == 0 {
		s.ChunkMin = DefaultChunkMin
	}
	if s.SubWrite == 0 {
		s.SubWrite = DefaultSubWrite
	}
	if s.CheckpointEvery == 0 {
		s.CheckpointEvery = DefaultCheckpointEvery
	}
	if s.Retry.Attempts == 0 {
		s.Retry.Attempts = DefaultAttempts
	}
	if s.Retry.Base == 0 {
		s.Retry.Base = DefaultBackoffBase
	}
	if s.Retry.Max == 0 {
		s.Retry.Max = DefaultBackoffMax
	}
	if s.Retry.Max < s.Retry.Base {
		s.Retry.Max = s.Retry.Base
	}
	if s.Checksum == "" {
		s.Checksum = DefaultChecksum
	}
	s.Checksum = strings.ToLower(s.Checksum)
	s.Expected = strings.ToLower(strings.TrimSpace(s.Expected))
	if s.Checksum == "none" {
		if s.Expected != "" {
			return bad("an expected checksum needs a checksum algorithm, not \"none\"")
		}
		return s, nil
	}
	h, err := backend.NewHash(s.Checksum)
	if err != nil {
		return s, fmt.Errorf("engine: %w", err)
	}
	if s.Expected != "" {
		if b, err := hex.DecodeString(s.Expected); err != nil || len(b) != h.Size() {
			return bad("expected checksum %q is not %d hex bytes of %s", s.Expected, h.Size(), s.Checksum)
		}
	}
	return s, nil
}

// chunkSize is the size of the partial transfers the missing bytes are cut
// into: about four per worker (see the package comment), at least ChunkMin.
func chunkSize(missing int64, cc int, min int64) int64 {
	n := int64(4 * cc)
	c := (missing + n - 1) / n
	if c < min {
		c = min
	}
	return c
}

// backoff is how long to wait before retry number attempt (1-based) of the
// operation identified by key. The jitter comes from a hash of seed, key and
// attempt rather than a shared random source: reproducible and lock-free.
func (r RetryPolicy) backoff(attempt int, key uint64) time.Duration {
	d := r.Base
	for i := 1; i < attempt && d < r.Max; i++ {
		d *= 2
	}
	if d > r.Max {
		d = r.Max
	}
	if d <= 1 {
		return d
	}
	x := splitmix64(uint64(r.Seed) ^ splitmix64(key) ^ uint64(attempt)<<56)
	half := d / 2
	return half + time.Duration(x%uint64(d-half+1))
}

func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
