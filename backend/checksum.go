package backend

import (
	"crypto/md5"
	"crypto/sha256"

	"encoding/hex"
	"fmt"
	"hash"
	"hash/adler32"
	"hash/crc32"
	"io"
)

// NewHash returns a hash for one of Algorithms.
func NewHash(algo string) (hash.Hash, error) {
	switch algo {
	case "adler32":
		return adler32.New(), nil
	case "md5":
		return md5.New(), nil
	case "sha256":
		return sha256.New(), nil
	case "crc32c":
		return crc32.New(crc32.MakeTable(crc32.Castagnoli)), nil
	}
	return nil, fmt.Errorf("%w: checksum %q (want one of %v)", ErrInvalid, algo, Algorithms)
}

// Sum computes the checksum of everything r yields.
func Sum(r io.Reader, algo string) (string, error) {
	h, err := NewHash(algo)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(h, r); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
