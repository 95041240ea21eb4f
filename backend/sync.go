package backend

import "slices"

// SyncLevels are the tests by which a copy that syncs (Globus's
// sync_level) keeps a file already at its destination instead of copying
// it, from the cheapest to the strictest: exists (anything there will
// do), size (the same size), mtime (the same size, and modified no
// earlier than the source), checksum (the same size and checksum). A file
// that fails its level's test is copied over the one there.
func SyncLevels() []string { return []string{"exists", "size", "mtime", "checksum"} }

// ValidSyncLevel reports whether level is one of SyncLevels.
func ValidSyncLevel(level string) bool { return slices.Contains(SyncLevels(), level) }

// InSync says whether dst, found at the destination, matches src by the
// level's test as far as their stats tell: decided is false when they
// cannot (the checksum level, for files of one size: the checksums
// decide). The mtime level needs both modification times.
func InSync(level string, src, dst FileInfo) (same, decided bool) {
	switch level {
	case "exists":
		return true, true
	case "size":
		return dst.Size == src.Size, true
	case "mtime":
		return dst.Size == src.Size && !dst.ModTime.Before(src.ModTime), true
	case "checksum":
		if dst.Size != src.Size {
			return false, true
		}
	}
	return false, false
}
