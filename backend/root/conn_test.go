package root

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
)

func netListen() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

// frame is one server response: streamid, status, body.
func frame(sid uint16, status uint16, body []byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, sid)
	b = binary.BigEndian.AppendUint16(b, status)
	b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
	return append(b, body...)
}

// attn is a kXR_attn frame with action act and what follows it.
func attn(act uint32, rest []byte) []byte {
	return frame(0, statusAttn, append(binary.BigEndian.AppendUint32(nil, act), rest...))
}

// asynresp wraps a response as XRootD delivers a deferred answer.
func asynresp(inner []byte) []byte {
	return attn(attnAsynResp, append(make([]byte, 4), inner...))
}

func TestRelayResponses(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), relayBuffer/16*2+3) // spans buffers
	for _, tc := range []struct {
		name string
		in   [][]byte
		want [][]byte
		err  string // "" : the input ends with EOF
	}{
		{
			name: "plain responses pass",
			in:   [][]byte{frame(0, 0, []byte("hand")), frame(7, 4000, []byte("part")), frame(7, 0, nil)},
			want: [][]byte{frame(0, 0, []byte("hand")), frame(7, 4000, []byte("part")), frame(7, 0, nil)},
		},
		{
			name: "large body",
			in:   [][]byte{frame(3, 0, big)},
			want: [][]byte{frame(3, 0, big)},
		},
		{
			name: "deferred answer is unwrapped",
			in:   [][]byte{frame(5, statusWaitResp, []byte{0, 0, 0, 30}), asynresp(frame(5, 0, []byte("adler32 0badcafe\x00")))},
			want: [][]byte{frame(5, 0, []byte("adler32 0badcafe\x00"))},
		},
		{
			name: "deferred error is unwrapped",
			in:   [][]byte{frame(5, statusWaitResp, []byte{0, 0, 0, 30}), asynresp(frame(5, 4003, []byte{0, 0, 11, 195, 'x', 0}))},
			want: [][]byte{frame(5, 4003, []byte{0, 0, 11, 195, 'x', 0})},
		},
		{
			name: "unsolicited messages are dropped",
			in: [][]byte{
				attn(5002, []byte("hello from the server")), // kXR_asyncms
				frame(0, statusAttn, []byte{1, 2}),          // too short to act on
				attn(attnAsynResp, []byte{0, 0}),            // truncated asynresp
				frame(9, 0, []byte("ok")),
			},
			want: [][]byte{frame(9, 0, []byte("ok"))},
		},
		{
			name: "disconnect request ends the relay",
			in:   [][]byte{frame(1, 0, nil), attn(attnAsyncDi, make([]byte, 8)), frame(2, 0, nil)},
			want: [][]byte{frame(1, 0, nil)},
			err:  "server ended the session",
		},
		{
			name: "truncated body",
			in:   [][]byte{frame(1, 0, []byte("abcdef"))[:10]},
			want: nil,
			err:  io.ErrUnexpectedEOF.Error(),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := relayResponses(&out, bytes.NewReader(bytes.Join(tc.in, nil)))
			if tc.err == "" && !errors.Is(err, io.EOF) || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("error %v, want %q (or EOF)", err, tc.err)
			}
			if want := bytes.Join(tc.want, nil); !bytes.Equal(out.Bytes(), want) {
				t.Errorf("relayed %d bytes %q..., want %d bytes %q...", out.Len(), head(out.Bytes()), len(want), head(want))
			}
		})
	}
	// go-hep's side failing is told apart from the server's.
	err := relayResponses(failWriter{}, bytes.NewReader(frame(1, 0, []byte("x"))))
	var le localError
	if !errors.As(err, &le) {
		t.Errorf("write failure: %v, want a localError", err)
	}
}

func head(b []byte) []byte { return b[:min(len(b), 40)] }

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, net.ErrClosed }
