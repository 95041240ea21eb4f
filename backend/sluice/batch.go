package sluice

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/sluice-dtn/sluice/backend"
)

// batchType is the Content-Type of a batch response.
const batchType = "application/x-sluice-batch"

// maxFrameHeader bounds one frame's JSON line: a path and a size, or a
// path and an error message.
const maxFrameHeader = 64 << 10

// BatchReader reads the files of one batch response in the order they
// were asked for.
type BatchReader struct {
	body io.ReadCloser
	br   *bufio.Reader
	cur  *frame // the file being read, nil before the first
	err  error  // sticky: the stream is broken or over

	// With checksums asked for, each file's bytes are followed by a
	// line with the source's checksum of them (read by Checksum or by
	// the next Next).
	sums    bool
	sum     string // the current file's, once read
	sumErr  error  // the current file's trailer said it failed
	sumRead bool
}

// Batch asks the agent for several files in one response (pipelining for
// small files). Read them with Next; Close the reader when done.
func (b *Backend) Batch(ctx context.Context, paths []string) (*BatchReader, error) {
	return b.batch(ctx, paths, "")
}

// BatchSums is Batch with the source's checksum (algo, one of
// backend.Algorithms) of every file it sends, computed from the bytes as
// they leave: read a file to its end, then call Checksum.
func (b *Backend) BatchSums(ctx context.Context, paths []string, algo string) (*BatchReader, error) {
	if _, err := backend.NewHash(algo); err != nil {
		return nil, wrap("batch", fmt.Sprintf("(%d paths)", len(paths)), err)
	}
	return b.batch(ctx, paths, algo)
}

func (b *Backend) batch(ctx context.Context, paths []string, algo string) (*BatchReader, error) {
	in := struct {
		Paths    []string `json:"paths"`
		Checksum string   `json:"checksum,omitempty"`
	}{paths, algo}
	if in.Paths == nil {
		in.Paths = []string{}
	}
	js, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	resp, err := b.do(ctx, http.MethodPost, "/v1/batch", nil, bytes.NewReader(js), int64(len(js)),
		http.Header{"Content-Type": {"application/json"}})
	if err != nil {
		return nil, wrap("batch", fmt.Sprintf("(%d paths)", len(paths)), err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != batchType {
		resp.Body.Close()
		return nil, wrap("batch", fmt.Sprintf("(%d paths)", len(paths)), fmt.Errorf("answered with %.40q, not a batch (%w)", ct, ErrNotAgent))
	}
	return &BatchReader{body: resp.Body, br: bufio.NewReader(resp.Body), sums: algo != ""}, nil
}

// Next moves to the next file and returns its name (as asked for), its
// size and a reader of exactly its bytes, valid until the next call. At the
// end of the batch err is io.EOF. If the agent could not send one file,
// name is set and err says why (errors.Is works with backend's sentinel
// errors); the batch goes on with the next call. If the stream itself
// breaks, name is empty and every later call returns the same error.
func (br *BatchReader) Next() (name string, size int64, r io.Reader, err error) {
	if br.err != nil {
		return "", 0, nil, br.err
	}
	if br.cur != nil {
		// Skip what the caller left of the previous file.
		if _, err := io.Copy(io.Discard, br.cur); err != nil {
			return br.fail(err)
		}
		if br.sums && !br.sumRead {
			if _, err := br.readSum(); err != nil && err != br.sumErr {
				return br.fail(err)
			}
		}
		br.cur = nil
	}
	br.sum, br.sumErr, br.sumRead = "", nil, false
	line, err := br.readLine()
	if err != nil {
		return br.fail(err)
	}
	var h struct {
		Path  string `json:"path"`
		Size  *int64 `json:"size"`
		Error string `json:"error"`
		Kind  string `json:"kind"`
	}
	if err := json.Unmarshal(line, &h); err != nil {
		// The stream's text is not echoed (nor json's, which quotes it).
		return br.fail(fmt.Errorf("bad frame header (%d bytes of something other than JSON)", len(line)))
	}
	switch {
	case h.Error != "" || h.Kind != "":
		kind := h.Kind
		if kindError(kind) == nil {
			kind = "internal"
		}
		return h.Path, 0, nil, fmt.Errorf("sluice batch %s: %w", sanitize(h.Path), &StatusError{Kind: kind, Message: sanitize(h.Error)})
	case h.Size == nil || *h.Size < 0:
		return br.fail(errors.New("bad frame header: no size"))
	}
	br.cur = &frame{r: br.br, left: *h.Size, name: h.Path}
	return h.Path, *h.Size, br.cur, nil
}

// Checksum returns the source's checksum of the current file, sent after
// its bytes (BatchSums only). Call it once the file's reader is at its
// end; it fails if bytes of the file are left unread. The agent may send
// an error instead of the checksum (backend.ErrChanged: the file changed
// while it was read): then this file failed, and Err stays nil.
func (br *BatchReader) Checksum() (string, error) {
	switch {
	case !br.sums:
		return "", errors.New("sluice batch: no checksums asked for")
	case br.cur == nil:
		return "", errors.New("sluice batch: no current file")
	case br.sumRead:
		return br.sum, br.sumErr
	case br.cur.left > 0:
		return "", fmt.Errorf("sluice batch: %d bytes of %s unread", br.cur.left, sanitize(br.cur.name))
	case br.err != nil:
		return "", br.err
	}
	sum, err := br.readSum()
	if err != nil && err == br.sumErr {
		return "", err // this file's failure alone
	}
	if err != nil {
		br.fail(err)
		return "", br.err
	}
	return sum, nil
}

// readSum reads the checksum line after the current file's bytes.
func (br *BatchReader) readSum() (string, error) {
	line, err := br.readLine()
	if err == io.EOF {
		err = fmt.Errorf("stream ended before the checksum of %s: %w", sanitize(br.cur.name), io.ErrUnexpectedEOF)
	}
	if err != nil {
		return "", err
	}
	var t struct {
		Path     string `json:"path"`
		Checksum string `json:"checksum"`
		Error    string `json:"error"`
		Kind     string `json:"kind"`
	}
	if err := json.Unmarshal(line, &t); err != nil || t.Path != br.cur.name || (t.Checksum == "" && t.Error == "" && t.Kind == "") {
		return "", fmt.Errorf("bad checksum line (%d bytes) after %s", len(line), sanitize(br.cur.name))
	}
	br.sumRead = true
	if t.Error != "" || t.Kind != "" {
		// The agent will not vouch for the bytes it sent (the file
		// changed while it read them): this file fails, the stream
		// goes on.
		kind := t.Kind
		if kindError(kind) == nil {
			kind = "internal"
		}
		br.sumErr = fmt.Errorf("sluice batch %s: %w", sanitize(t.Path), &StatusError{Kind: kind, Message: sanitize(t.Error)})
		return "", br.sumErr
	}
	br.sum = t.Checksum
	return t.Checksum, nil
}

// Err is the stream's own failure: nil while files can still be read
// from it, even when the last one failed on its own.
func (br *BatchReader) Err() error {
	if br.err == io.EOF {
		return nil
	}
	return br.err
}

func (br *BatchReader) fail(err error) (string, int64, io.Reader, error) {
	if err != io.EOF {
		err = fmt.Errorf("sluice batch: %w", err)
	}
	br.err = err
	return "", 0, nil, err
}

// readLine reads one frame header; io.EOF only if the stream ends cleanly
// between frames.
func (br *BatchReader) readLine() ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxFrameHeader {
			return nil, fmt.Errorf("frame header longer than %d bytes", maxFrameHeader)
		}
		switch {
		case err == nil:
			return line[:len(line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF && len(line) == 0:
			return nil, io.EOF
		case err == io.EOF:
			return nil, fmt.Errorf("stream ended inside a frame header: %w", io.ErrUnexpectedEOF)
		default:
			return nil, err
		}
	}
}

// Close ends the batch, whether or not every file was read.
func (br *BatchReader) Close() error {
	if br.err == nil {
		br.err = errors.New("sluice batch: reader closed")
	}
	return br.body.Close()
}

// frame reads one file's bytes, and fails rather than ends early if the
// stream stops short of the announced size.
type frame struct {
	r    io.Reader
	left int64
	name string
}

func (f *frame) Read(p []byte) (int, error) {
	if f.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > f.left {
		p = p[:f.left]
	}
	n, err := f.r.Read(p)
	f.left -= int64(n)
	if err == io.EOF && f.left > 0 {
		err = fmt.Errorf("sluice batch: stream ended %d bytes short of the file: %w", f.left, io.ErrUnexpectedEOF)
	}
	if err == io.EOF {
		err = nil // more frames may follow; this one ends at left == 0
	}
	return n, err
}
