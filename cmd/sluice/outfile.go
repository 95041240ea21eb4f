package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// checkOutFile says, before a long run, whether path can take its output
// later: its directory exists and path is not itself a directory.
func checkOutFile(path string) error {
	if path == "" {
		return errors.New("empty output path")
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("%s is a directory", path)
	}
	dir := filepath.Dir(path)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("%s: directory %s does not exist", path, dir)
	}
	return nil
}

// writeOutFile writes an output file so that a failure (a full disk, an
// error of write) never leaves a half-written file under its name: the
// bytes go to a temporary file beside it, which is renamed into place
// once complete. Two kinds of target are written differently, as a user
// naming them means: a symbolic link is followed (the file it points to
// is replaced, the link stays), and an existing file that is not a regular
// file (a device such as /dev/stdout, a named pipe) is written directly,
// since renaming over it would replace the device. New files get mode
// perm; a replaced regular file keeps its mode.
func writeOutFile(path string, perm fs.FileMode, write func(io.Writer) error) error {
	if path == "" {
		return errors.New("empty output path")
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	} else if target, lerr := os.Readlink(path); lerr == nil {
		// A link to a file not there yet: create that file.
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(path), target)
		}
		path = target
	}
	fi, err := os.Stat(path)
	switch {
	case err == nil && fi.IsDir():
		return fmt.Errorf("%s is a directory", path)
	case err == nil && !fi.Mode().IsRegular():
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		err = write(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	case err == nil:
		perm = fi.Mode().Perm()
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := write(tmp); err != nil {
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	done = true
	return nil
}
