package gridftp

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// slowCksmServer is an FTP control server that answers a login, FEAT
// (offering CKSM MD5), TYPE, NOOP and MLST (every path a file of size
// bytes), and answers CKSM only after delay (never, if delay < 0): a
// server reading a file of that size at size/delay bytes per second, or
// one that froze while it read. It needs no globus-gridftp-server.
func slowCksmServer(t *testing.T, size int64, delay time.Duration) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { l.Close(); close(stop) })
	go func() {
		for {
			nc, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				r := bufio.NewReader(nc)
				fmt.Fprint(nc, "220 fake\r\n")
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					cmd, arg, _ := strings.Cut(strings.TrimSpace(line), " ")
					switch strings.ToUpper(cmd) {
					case "USER":
						fmt.Fprint(nc, "230 in\r\n")
					case "FEAT":
						fmt.Fprint(nc, "211-Features:\r\n CKSM MD5:10;\r\n211 End.\r\n")
					case "TYPE", "NOOP":
						fmt.Fprint(nc, "200 ok\r\n")
					case "MLST":
						fmt.Fprintf(nc, "250-status\r\n Type=file;Size=%d; %s\r\n250 End.\r\n", size, arg)
					case "CKSM":
						if delay < 0 {
							<-stop // frozen: the connection stays open
							return
						}
						time.Sleep(delay)
						fmt.Fprint(nc, "213 d41d8cd98f00b204e9800998ecf8427e\r\n")
					case "QUIT":
						fmt.Fprint(nc, "221 bye\r\n")
						return
					default:
						fmt.Fprint(nc, "502 no\r\n")
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}

// TestChecksumBounded: a checksum the server computes may take longer
// than Stall (the server reads the whole file before it answers), in
// proportion to the file's size; but a server that never answers fails
// the checksum within Stall plus the size at ChecksumRate, rather than
// holding the transfer (whose context has no deadline) for ever.
func TestChecksumBounded(t *testing.T) {
	const stall = 500 * time.Millisecond
	for _, tc := range []struct {
		name  string
		size  int64
		delay time.Duration
		rate  float64
		ok    bool
		// bound: the checksum must end (with its answer or an error)
		// within this.
		bound time.Duration
	}{
		// 30 MB at 10 MB/s: up to 3.5 s; the server takes 1.5 s.
		{"slow but working", 30e6, 1500 * time.Millisecond, 10e6, true, 3 * time.Second},
		// The same server frozen: the bound is 3.5 s.
		{"frozen", 30e6, -1, 10e6, false, 5 * time.Second},
		// An empty file is bounded by Stall alone.
		{"frozen, empty file", 0, -1, 10e6, false, 2 * time.Second},
		// No bound asked for: a server slower than Stall still answers.
		{"unbounded", 0, 1500 * time.Millisecond, -1, true, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := slowCksmServer(t, tc.size, tc.delay)
			b, err := New("ftp://"+addr+"/", Options{Stall: stall, ChecksumRate: tc.rate, Binary: "true"})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			start := time.Now()
			done := make(chan error, 1)
			var sum string
			go func() {
				var err error
				sum, err = b.Checksum(context.Background(), "f", "md5")
				done <- err
			}()
			select {
			case err := <-done:
				took := time.Since(start)
				switch {
				case tc.ok && (err != nil || sum != "d41d8cd98f00b204e9800998ecf8427e"):
					t.Errorf("Checksum = %q, %v after %v; want the server's answer", sum, err, took)
				case !tc.ok && (err == nil || !strings.Contains(err.Error(), "no reply from the server within")):
					t.Errorf("Checksum = %q, %v after %v; want an error naming the bound", sum, err, took)
				case took > tc.bound:
					t.Errorf("Checksum took %v; want at most %v", took, tc.bound)
				}
			case <-time.After(tc.bound + 5*time.Second):
				t.Fatalf("Checksum still blocked after %v", time.Since(start))
			}
		})
	}
}
