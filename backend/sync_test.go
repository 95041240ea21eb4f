package backend

import (
	"testing"
	"time"
)

func TestInSync(t *testing.T) {
	at := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	src := FileInfo{Size: 10, ModTime: at}
	type verdict struct{ same, decided bool }
	for _, tc := range []struct {
		name string
		dst  FileInfo
		want map[string]verdict // by level
	}{
		{"identical stats", FileInfo{Size: 10, ModTime: at},
			map[string]verdict{"exists": {true, true}, "size": {true, true}, "mtime": {true, true}, "checksum": {false, false}}},
		{"newer", FileInfo{Size: 10, ModTime: at.Add(time.Hour)},
			map[string]verdict{"exists": {true, true}, "size": {true, true}, "mtime": {true, true}, "checksum": {false, false}}},
		{"older", FileInfo{Size: 10, ModTime: at.Add(-time.Second)},
			map[string]verdict{"exists": {true, true}, "size": {true, true}, "mtime": {false, true}, "checksum": {false, false}}},
		{"other size, newer", FileInfo{Size: 11, ModTime: at.Add(time.Hour)},
			map[string]verdict{"exists": {true, true}, "size": {false, true}, "mtime": {false, true}, "checksum": {false, true}}},
		{"empty", FileInfo{Size: 0, ModTime: at},
			map[string]verdict{"exists": {true, true}, "size": {false, true}, "mtime": {false, true}, "checksum": {false, true}}},
	} {
		for _, level := range SyncLevels() {
			same, decided := InSync(level, src, tc.dst)
			if w := tc.want[level]; same != w.same || decided != w.decided {
				t.Errorf("%s, level %s: same %v, decided %v; want %v, %v", tc.name, level, same, decided, w.same, w.decided)
			}
		}
	}
	if _, decided := InSync("sometimes", src, src); decided || ValidSyncLevel("sometimes") || !ValidSyncLevel("mtime") {
		t.Error("an unknown level is decided or valid")
	}
}
