package trace

import (
	"bytes"
	"os"
	"slices"
	"testing"
)

// The loaders read files users hand them; whatever the bytes, they must
// return an error or a valid trace, never panic. Run with, e.g.,
//
//	go test ./trace/ -run '^$' -fuzz FuzzReadGridFTPLog -fuzztime 30s

func FuzzReadGridFTPLog(f *testing.F) {
	sample, err := os.ReadFile("testdata/nersc-dtn-sample.log")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(sample)
	f.Add([]byte(okLine))
	f.Add([]byte(okLine + " TASKID=none retrans=0\n\n" + okLine))
	f.Add([]byte("NL.EVNT=FTP_INFO CODE=226 TYPE=STOR DEST=1[1.1.1.1] NBYTES=5 START=20200101000000.5 HOST=h FILE= x"))
	f.Add([]byte("[1] x :: Transfer stats: DATE= HOST= NL.EVNT=FTP_INFO START=00000101000000.999999999 NBYTES=9223372036854775807 DEST=[ TYPE=RETR CODE=226"))
	f.Add([]byte("FILE=FILE=FILE= NL.EVNT=NL.EVNT=\r\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		tr, rep, err := ReadGridFTPLog(bytes.NewReader(in))
		if rep == nil {
			t.Fatal("nil report")
		}
		if err != nil {
			return
		}
		if err := tr.Validate(); err != nil {
			t.Fatalf("invalid trace from %q: %v", in, err)
		}
		if rep.Parsed != len(tr.Transfers) || rep.Parsed == 0 {
			t.Fatalf("report says %d parsed, trace has %d", rep.Parsed, len(tr.Transfers))
		}
	})
}

func FuzzReadCSV(f *testing.F) {
	f.Add([]byte("id,arrival,src,dst,size,batch,path\n0,0,s,a,1,0,/x\n1,1.5,s,b,2,1,\"/y, z\"\n"))
	f.Add([]byte("arrival,src,dst,size\n5,s,a,10\n1.5,s,b,2.7e9\n"))
	f.Add([]byte("\ufeffARRIVAL,SRC,DST,SIZE\n1e308,s,a,9223372036854775807\n"))
	f.Add([]byte("arrival,src,dst,size\n-1,s,a,1\nNaN,s,a,abc\n"))
	f.Add([]byte("arrival,src,dst,size\n1,\"s,a,1\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, in []byte) {
		tr, err := ReadCSV(bytes.NewReader(in))
		if err != nil {
			return
		}
		if err := tr.Validate(); err != nil {
			t.Fatalf("invalid trace from %q: %v", in, err)
		}
		// Whatever was accepted must survive a write/read round trip.
		var buf bytes.Buffer
		if err := WriteCSV(&buf, tr); err != nil {
			t.Fatal(err)
		}
		back, err := ReadCSV(&buf)
		if err != nil {
			t.Fatalf("re-reading written CSV: %v\n%s", err, buf.Bytes())
		}
		if !slices.Equal(back.Transfers, tr.Transfers) {
			t.Fatalf("round trip changed the trace:\n%+v\n%+v", tr.Transfers, back.Transfers)
		}
	})
}

func FuzzReadJSONL(f *testing.F) {
	f.Add([]byte(`{"id":1,"arrival":0.5,"src":"s","dst":"a","size":3,"batch":true,"path":"/p"}` + "\n"))
	f.Add([]byte(`{"arrival":1,"src":"s","dst":"a","size":2e3}` + "\n\n" + `{"arrival":0,"src":"s","dst":"b","size":0}`))
	f.Add([]byte(`{"arrival":-1,"src":"s","dst":"a","size":"x"}`))
	f.Add([]byte(`[null]`))
	f.Fuzz(func(t *testing.T, in []byte) {
		tr, err := ReadJSONL(bytes.NewReader(in))
		if err != nil {
			return
		}
		if err := tr.Validate(); err != nil {
			t.Fatalf("invalid trace from %q: %v", in, err)
		}
		var buf bytes.Buffer
		if err := WriteJSONL(&buf, tr); err != nil {
			t.Fatal(err)
		}
		back, err := ReadJSONL(&buf)
		if err != nil {
			t.Fatalf("re-reading written JSONL: %v\n%s", err, buf.Bytes())
		}
		if !slices.Equal(back.Transfers, tr.Transfers) {
			t.Fatalf("round trip changed the trace:\n%+v\n%+v", tr.Transfers, back.Transfers)
		}
	})
}
