package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteOutFile: output files are replaced whole or not at all, links
// are followed, and devices are written to, not replaced.
func TestWriteOutFile(t *testing.T) {
	content := func(s string) func(io.Writer) error {
		return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
	}
	failing := func(w io.Writer) error {
		io.WriteString(w, "half")
		return errors.New("disk on fire")
	}
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			return "<" + err.Error() + ">"
		}
		return string(b)
	}
	tests := []struct {
		name  string
		setup func(dir string) string // returns the path to write
		write func(io.Writer) error
		check func(t *testing.T, dir, path string, err error)
	}{
		{"new file", func(dir string) string { return filepath.Join(dir, "out") }, content("new"),
			func(t *testing.T, dir, p string, err error) {
				fi, serr := os.Stat(p)
				if err != nil || read(p) != "new" || serr != nil || fi.Mode().Perm() != 0o644 {
					t.Errorf("err %v, content %q, mode %v", err, read(p), fi.Mode())
				}
			}},
		{"replace keeps mode", func(dir string) string {
			p := filepath.Join(dir, "out")
			os.WriteFile(p, []byte("old"), 0o600)
			return p
		}, content("new"), func(t *testing.T, dir, p string, err error) {
			fi, _ := os.Stat(p)
			if err != nil || read(p) != "new" || fi.Mode().Perm() != 0o600 {
				t.Errorf("err %v, content %q, mode %v", err, read(p), fi.Mode())
			}
		}},
		{"failed write keeps the old file", func(dir string) string {
			p := filepath.Join(dir, "out")
			os.WriteFile(p, []byte("old"), 0o644)
			return p
		}, failing, func(t *testing.T, dir, p string, err error) {
			if err == nil || read(p) != "old" {
				t.Errorf("err %v, content %q", err, read(p))
			}
		}},
		{"failed write leaves nothing", func(dir string) string { return filepath.Join(dir, "out") }, failing,
			func(t *testing.T, dir, p string, err error) {
				if _, serr := os.Stat(p); err == nil || !os.IsNotExist(serr) {
					t.Errorf("err %v, stat %v", err, serr)
				}
			}},
		{"symlink followed", func(dir string) string {
			os.WriteFile(filepath.Join(dir, "real"), []byte("old"), 0o644)
			os.Symlink("real", filepath.Join(dir, "link"))
			return filepath.Join(dir, "link")
		}, content("new"), func(t *testing.T, dir, p string, err error) {
			fi, lerr := os.Lstat(p)
			if err != nil || lerr != nil || fi.Mode()&os.ModeSymlink == 0 || read(filepath.Join(dir, "real")) != "new" {
				t.Errorf("err %v; the link is %v, the target holds %q", err, fi.Mode(), read(filepath.Join(dir, "real")))
			}
		}},
		{"dangling symlink creates its target", func(dir string) string {
			os.Symlink("later", filepath.Join(dir, "link"))
			return filepath.Join(dir, "link")
		}, content("new"), func(t *testing.T, dir, p string, err error) {
			if err != nil || read(filepath.Join(dir, "later")) != "new" {
				t.Errorf("err %v, target %q", err, read(filepath.Join(dir, "later")))
			}
		}},
		{"device written, not replaced", func(dir string) string { return os.DevNull }, content("new"),
			func(t *testing.T, dir, p string, err error) {
				fi, serr := os.Stat(os.DevNull)
				if err != nil || serr != nil || fi.Mode()&os.ModeCharDevice == 0 {
					t.Errorf("err %v; %s is now %v", err, os.DevNull, fi.Mode())
				}
			}},
		{"directory refused", func(dir string) string { return dir }, content("new"),
			func(t *testing.T, dir, p string, err error) {
				if err == nil || !strings.Contains(err.Error(), "is a directory") {
					t.Errorf("err %v", err)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := tc.setup(dir)
			err := writeOutFile(p, 0o644, tc.write)
			tc.check(t, dir, p, err)
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				if strings.Contains(e.Name(), ".tmp") {
					t.Errorf("left %s behind", e.Name())
				}
			}
		})
	}
}
