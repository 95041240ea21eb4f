package file

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to start writing a range just written to
// disk, without waiting for it (sync_file_range with
// SYNC_FILE_RANGE_WRITE). A copy fsyncs each file before its rename; with
// the writeback started as the data arrives, that fsync finds little left
// to write, instead of the whole file at once after the last byte (about
// a second per GB here, a tail the transfer would wait through). It is
// advice: an error changes nothing that the fsync will not check.
func startWriteback(f *os.File, off, n int64) {
	unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}
