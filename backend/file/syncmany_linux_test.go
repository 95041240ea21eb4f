package file

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSyncManyEveryFileSystem: SyncMany syncs the file system of every
// file named, once each, not only the root's: the local files of a copy
// (a backend on "/") may be on a file system mounted below it. Before, a
// file on /dev/shm was left to a sync of the root's file system.
func TestSyncManyEveryFileSystem(t *testing.T) {
	disk := t.TempDir()
	shm, err := os.MkdirTemp("/dev/shm", "sluice-test-")
	if err != nil {
		t.Skipf("no /dev/shm to put a second file system's file on: %v", err)
	}
	defer os.RemoveAll(shm)
	dev := func(p string) uint64 {
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		return st.Dev
	}
	if dev(disk) == dev(shm) {
		t.Skipf("%s and %s are on one file system", disk, shm)
	}
	var files []string
	for _, dir := range []string{disk, disk, filepath.Join(disk, "sub"), shm} {
		os.MkdirAll(dir, 0o755)
		f, err := os.CreateTemp(dir, "f")
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		files = append(files, f.Name())
	}
	b, err := New("/")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	synced := map[uint64]int{}
	b.syncfs = func(fd int) error {
		var st syscall.Stat_t
		if err := syscall.Fstat(fd, &st); err != nil {
			return err
		}
		synced[st.Dev]++
		return unix.Syncfs(fd)
	}
	if err := b.SyncMany(context.Background(), files); err != nil {
		t.Fatal(err)
	}
	if len(synced) != 2 || synced[dev(disk)] != 1 || synced[dev(shm)] != 1 {
		t.Errorf("file systems synced (device: times) %v, want %d and %d once each", synced, dev(disk), dev(shm))
	}
	if err := b.SyncMany(context.Background(), []string{filepath.Join(disk, "missing", "f")}); err == nil {
		t.Error("a file in a missing directory was synced")
	}
}
