package auth

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// maxKeyFile bounds how much of a key file LoadKey reads: a key is a line
// of base64, so anything much larger is the wrong file.
const maxKeyFile = 4 << 10

// LoadKey reads a token key written by GenerateKey: base64 of at least
// MinKeySize bytes. The file must be a regular file readable by its owner
// only (mode 0600 or stricter), because anyone who can read it can mint
// tokens for every agent that uses it.
func LoadKey(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("token key %s does not exist (create one with `sluice keygen %s`)", name, name)
		}
		return nil, fmt.Errorf("token key: %w", err)
	}
	defer f.Close()
	// Stat the open file, not the name, so the checked file is the read one.
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("token key: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("token key %s is not a regular file", name)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("token key %s is readable or writable by group or others (mode %04o); run chmod 600 %s", name, perm, name)
	}
	raw, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("token key %s: %w", name, err)
	}
	if len(raw) > maxKeyFile {
		return nil, fmt.Errorf("token key %s is larger than %d bytes: not a key file", name, maxKeyFile)
	}
	text := bytes.TrimSpace(raw)
	key, err := base64.StdEncoding.DecodeString(string(text))
	if err != nil {
		// Also accept unpadded base64, as hand-made keys often are.
		if k, err2 := base64.RawStdEncoding.DecodeString(string(text)); err2 == nil {
			key, err = k, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("token key %s is not base64: %w", name, err)
	}
	if len(key) < MinKeySize {
		return nil, fmt.Errorf("token key %s holds %d bytes, need at least %d (generate one with `sluice keygen`)", name, len(key), MinKeySize)
	}
	return key, nil
}

// GenerateKey writes a new random key of MinKeySize bytes to name, as
// base64, with mode 0600, and returns it. It refuses to replace an
// existing file: replacing a key silently invalidates every token minted
// with it. The key is written to a temporary file in the same directory
// and linked into place, so a crash leaves either no key or a whole one,
// and a file created meanwhile by someone else is not overwritten.
func GenerateKey(name string) ([]byte, error) {
	if name == "" || strings.HasSuffix(name, "/") {
		return nil, fmt.Errorf("token key: %q is not a file name", name)
	}
	if _, err := os.Lstat(name); err == nil {
		return nil, fmt.Errorf("token key %s already exists; remove it first if you mean to replace it", name)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("token key: %w", err)
	}
	key := make([]byte, MinKeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("token key: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".tmp*")
	if err != nil {
		return nil, fmt.Errorf("token key: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the link, this only drops the temporary name
	// CreateTemp already uses 0600; Chmod makes it explicit and immune to
	// how the temporary file was created.
	err = tmp.Chmod(0o600)
	if err == nil {
		_, err = tmp.WriteString(base64.StdEncoding.EncodeToString(key) + "\n")
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("token key %s: %w", name, err)
	}
	// Link, unlike rename, fails if name exists: no check-then-act race.
	// File systems without hard links get a rename after a second check.
	if err := os.Link(tmp.Name(), name); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("token key %s already exists; remove it first if you mean to replace it", name)
		}
		if _, serr := os.Lstat(name); !errors.Is(serr, fs.ErrNotExist) {
			return nil, fmt.Errorf("token key %s: %w", name, err)
		}
		if err := os.Rename(tmp.Name(), name); err != nil {
			return nil, fmt.Errorf("token key %s: %w", name, err)
		}
	}
	if d, err := os.Open(filepath.Dir(name)); err == nil {
		d.Sync() // best effort: make the new name durable
		d.Close()
	}
	return key, nil
}
