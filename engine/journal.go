package engine

import (
	"context"
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
	Version int       `json:"version"`
	Src     string    `json:"src"`
	Dst     string    `json:"dst"`
	Size    int64     `json:"size"`
	ModTime time.Time `json:"src_mtime,omitzero"`
	// Replicas are, for a transfer from several replicas, each one's
	// modification time by Source.Name. ModTime is the time of only the
	// replica used as reference then, the first that answered; replicas
	// on other hosts were written at other moments, so a resume whose
	// first replica is down must compare each replica with its own.
	Replicas map[string]time.Time `json:"replica_mtimes,omitempty"`
	Done     [][2]int64           `json:"done"`
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

// Journals keeps checkpoint journals by key. The default (FileJournals)
// keeps each in a local file named by the key; the service keeps them in
// its database so that any server can resume a transfer.
type Journals interface {
	// Load returns the journal stored under key, or an error that
	// wraps fs.ErrNotExist if there is none.
	Load(ctx context.Context, key string) ([]byte, error)
	// Save replaces the journal under key atomically: a later Load sees
	// this journal or the previous one, never a mix, even after a crash.
	Save(ctx context.Context, key string, data []byte) error
	// Delete removes the journal (no error if there is none).
	Delete(ctx context.Context, key string) error
}

// FileJournals keeps each journal in the local file named by its key.
type FileJournals struct{}

// Load implements Journals.
func (FileJournals) Load(_ context.Context, name string) ([]byte, error) {
	return os.ReadFile(name)
}

// Save implements Journals.
func (FileJournals) Save(_ context.Context, name string, data []byte) error {
	return writeFileAtomic(name, data)
}

// Delete implements Journals.
func (FileJournals) Delete(_ context.Context, name string) error {
	return removeJournal(name)
}

// Checkpoint is what a journal says about a transfer.
type Checkpoint struct {
	Src, Dst string
	Size     int64
	Done     int64 // bytes recorded as written
}

// Complete reports whether every byte was recorded as written: the
// transfer reached verification, and may have renamed its file already.
func (c Checkpoint) Complete() bool { return c.Done == c.Size }

// ReadCheckpoint reads the journal under key. ok is false when there is
// none; a journal that does not parse is an error.
func ReadCheckpoint(ctx context.Context, js Journals, key string) (c Checkpoint, ok bool, err error) {
	j, ok, err := loadJournal(ctx, js, key)
	if err != nil || !ok {
		return Checkpoint{}, false, err
	}
	return Checkpoint{Src: j.Src, Dst: j.Dst, Size: j.Size, Done: j.ranges().total()}, true, nil
}

// SaveComplete records under key a checkpoint of a copy of src to dst,
// size bytes, with every byte written: what the engine itself saves before
// it verifies and renames. A caller that moves a file without the engine
// (the service's pull batches) saves it before putting the file in place,
// so that a rerun after a crash finds the file may be in place already
// (Checkpoint.Complete) and checks it instead of copying it again.
func SaveComplete(ctx context.Context, js Journals, key, src, dst string, size int64) error {
	return saveJournal(ctx, js, key, completeJournal(src, dst, size))
}

// CompleteJournal is what SaveComplete saves, encoded: a caller that
// saves many at once (one store transaction for a pull batch) writes
// these.
func CompleteJournal(src, dst string, size int64) ([]byte, error) {
	b, err := json.Marshal(completeJournal(src, dst, size))
	if err != nil {
		return nil, fmt.Errorf("encoding journal: %w", err)
	}
	return b, nil
}

// completeJournal is the journal of a copy of src to dst, size bytes,
// every one written.
func completeJournal(src, dst string, size int64) journal {
	var done ranges
	if size > 0 {
		done = ranges{{0, size}}
	}
	return newJournal(src, dst, size, time.Time{}, done)
}

// readJournal loads a journal from a local file.
func readJournal(name string) (journal, bool, error) {
	return loadJournal(context.Background(), FileJournals{}, name)
}

// loadJournal loads a journal. A missing one is (journal{}, false, nil);
// one that does not parse or is inconsistent is an error the caller
// treats as "start over", never as a failure of the transfer.
func loadJournal(ctx context.Context, js Journals, name string) (journal, bool, error) {
	b, err := js.Load(ctx, name)
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

// writeJournal replaces a journal file atomically.
func writeJournal(name string, j journal) error {
	return saveJournal(context.Background(), FileJournals{}, name, j)
}

// saveJournal replaces the journal atomically: a reader (a rerun after a
// crash) sees either the previous checkpoint or this one, never a mix.
func saveJournal(ctx context.Context, js Journals, name string, j journal) error {
	b, err := json.Marshal(j)
	if err != nil {
		return fmt.Errorf("encoding journal: %w", err)
	}
	if err := js.Save(ctx, name, b); err != nil {
		return fmt.Errorf("writing journal %s: %w", name, err)
	}
	return nil
}

// writeFileAtomic replaces a file by writing a temporary one, syncing it
// and renaming it over the old one.
func writeFileAtomic(name string, b []byte) error {
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
