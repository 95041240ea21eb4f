package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// journalVersion changes whenever the format changes; older journals are
// then ignored (start over) rather than misread.
const journalVersion = 1

// journal is the checkpoint of one transfer: what it is of (to refuse a
// journal that belongs to another file or an older version of it) and
// which byte ranges of the temporary file are done. It is all the state a
// preempted transfer needs (SC'15 §4.5: "a set of start, end offsets").
type journal struct {
	Version int        `json:"version"`
	Src     string     `json:"src"`
	Dst     string     `json:"dst"`
	Size    int64      `json:"size"`
	ModTime time.Time  `json:"src_mtime,omitzero"`
	Done    [][2]int64 `json:"done"`
}

func (j journal) ranges() ranges {
	r := make(ranges, len(j.Done))
	for i, d := range j.Done {
		r[i] = span{d[0], d[1]}
	}
	return r
}

func newJournal(src, dst string, size int64, mtime time.Time, done ranges) journal {
	j := journal{Version: journalVersion, Src: src, Dst: dst, Size: size, ModTime: mtime, Done: make([][2]int64, len(done))}
	for i, s := range done {
		j.Done[i] = [2]int64{s.Off, s.End}
	}
	return j
}

// readJournal loads a journal. A missing file is (journal{}, false, nil);
// a file that does not parse or is inconsistent is an error the caller
// treats as "start over", never as a failure of the transfer.
func readJournal(name string) (journal, bool, error) {
	b, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return journal{}, false, nil
	}
	if err != nil {
		return journal{}, false, fmt.Errorf("reading journal %s: %w", name, err)
	}
	var j journal
	if err := json.Unmarshal(b, &j); err != nil {
		return journal{}, true, fmt.Errorf("journal %s is corrupt: %w", name, err)
	}
	if j.Version != journalVersion {
		return journal{}, true, fmt.Errorf("journal %s has version %d, want %d", name, j.Version, journalVersion)
	}
	if j.Size < 0 {
		return journal{}, true, fmt.Errorf("journal %s has size %d", name, j.Size)
	}
	if err := j.ranges().check(j.Size); err != nil {
		return journal{}, true, fmt.Errorf("journal %s is inconsistent: %w", name, err)
	}
	return j, true, nil
}

// writeJournal replaces the journal atomically: a reader (a rerun after a
// crash) sees either the previous checkpoint or this one, never a mix.
func writeJournal(name string, j journal) error {
	b, err := json.Marshal(j)
	if err != nil {
		return fmt.Errorf("encoding journal: %w", err)
	}
	dir := filepath.Dir(name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("journal directory: %w", err)
	}
	tmp := name + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("writing journal: %w", err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, name)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing journal %s: %w", name, err)
	}
	// Sync the directory so the rename itself survives a host crash.
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// removeJournal deletes the journal (and a leftover temporary copy).
func removeJournal(name string) error {
	os.Remove(name + ".tmp")
	if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing journal: %w", err)
	}
	return nil
}
