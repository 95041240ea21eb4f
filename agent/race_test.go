package agent

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-dtn/sluice/auth"
	"github.com/sluice-dtn/sluice/backend"
)

// TestSymlinkSwapRace: on a DTN where users have shell accounts, alice
// swaps, as fast as she can, a file of her own for a link to bob's secret
// and a directory of her own for a link to bob's directory, while her
// token (prefix and link base /alice) reads, writes, renames, removes,
// lists and batches through those names. No request may reach bob's
// files: each is resolved once, below /alice, and used through that
// handle. An agent that checked the links first and opened the path after
// returned bob's secret to about one read in five, and wrote, renamed and
// removed in bob's directory, in every run of this test.
func TestSymlinkSwapRace(t *testing.T) {
	const rounds = 400
	e := newEnv(t, "dtn1", nil)
	// Of four sizes, so that a listing tells whose file it shows.
	const own, bobs, bobsOther, planted = "alice's own bytes", "bob's secret bytes", "bob's important file", "planted by alice"
	e.write("alice/race", own)
	e.write("bob/secret", bobs)
	e.write("bob/important", bobsOther)
	for i := range rounds {
		e.write(fmt.Sprintf("alice/src%d", i), planted)
	}
	alice := filepath.Join(e.root, "alice")
	if err := os.Mkdir(filepath.Join(alice, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../bob", filepath.Join(alice, "dl")); err != nil {
		t.Fatal(err)
	}
	tok := e.tokenFor(auth.Claims{Sub: "alice", Scope: auth.ScopeRW, Prefix: "/alice", Base: "/alice",
		Aud: e.name, Exp: time.Now().Add(time.Hour).Unix()})
	bobSum := md5.Sum([]byte(bobs))

	// The swapper: race is alice's file, then a link to bob's secret, and
	// again; d is alice's directory, then (exchanged with dl) a link to
	// bob's directory, and again.
	stop := make(chan struct{})
	var swaps atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		race, tmp := filepath.Join(alice, "race"), filepath.Join(alice, ".tmp")
		d, dl := filepath.Join(alice, "d"), filepath.Join(alice, "dl")
		for {
			select {
			case <-stop:
				return
			default:
			}
			os.Remove(tmp)
			if os.Symlink("../bob/secret", tmp) == nil {
				os.Rename(tmp, race)
			}
			unix.Renameat2(unix.AT_FDCWD, d, unix.AT_FDCWD, dl, unix.RENAME_EXCHANGE)
			if os.WriteFile(tmp, []byte(own), 0o644) == nil {
				os.Rename(tmp, race)
			}
			unix.Renameat2(unix.AT_FDCWD, d, unix.AT_FDCWD, dl, unix.RENAME_EXCHANGE)
			swaps.Add(1)
		}
	})

	client := e.srv.Client()
	do := func(method, target, body string) (int, string) {
		req, err := http.NewRequest(method, e.srv.URL+target, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, target, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	leaks := map[string]int{}
	requests := 0
	for i := range rounds {
		requests += 8
		if _, b := do("GET", "/v1/files/alice/race", ""); strings.Contains(b, bobs) {
			leaks["read"]++
		}
		if _, b := do("GET", "/v1/checksum/alice/race?algo=md5", ""); strings.Contains(b, hex.EncodeToString(bobSum[:])) {
			leaks["checksum"]++
		}
		if _, b := do("POST", "/v1/batch", jsonBody(map[string]any{"paths": []string{"/alice/race"}})); strings.Contains(b, bobs) {
			leaks["batch"]++
		}
		// alice's files have other sizes than bob's: a listed size of
		// one of bob's is his file's, seen through a link.
		var list []backend.FileInfo
		if _, b := do("GET", "/v1/list/alice?recursive=1", ""); json.Unmarshal([]byte(b), &list) == nil {
			for _, f := range list {
				if f.Size == int64(len(bobs)) || f.Size == int64(len(bobsOther)) {
					leaks["list"]++
				}
			}
		}
		do("PUT", fmt.Sprintf("/v1/files/alice/d/put%d", i), planted)
		do("POST", fmt.Sprintf("/v1/mkdir/alice/d/dir%d", i), "")
		do("POST", "/v1/rename", jsonBody(map[string]string{"from": fmt.Sprintf("/alice/src%d", i), "to": "/alice/d/important"}))
		do("DELETE", "/v1/files/alice/d/secret", "")
	}
	close(stop)
	wg.Wait()

	// Bob's directory holds his two files, unchanged, and nothing else.
	if got, _ := os.ReadFile(filepath.Join(e.root, "bob/secret")); string(got) != bobs {
		leaks["delete or overwrite"]++
	}
	if got, _ := os.ReadFile(filepath.Join(e.root, "bob/important")); string(got) != bobsOther {
		leaks["rename over"]++
	}
	ents, err := os.ReadDir(filepath.Join(e.root, "bob"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ent := range ents {
		if n := ent.Name(); n != "secret" && n != "important" {
			leaks["write or mkdir"]++
		}
	}
	t.Logf("%d requests against %d swaps", requests, swaps.Load())
	if len(leaks) > 0 {
		t.Errorf("requests reached bob's files through alice's links: %v", leaks)
	}
	if swaps.Load() < rounds/4 {
		// Too few swaps to have raced anything: the test proves nothing.
		t.Errorf("only %d swaps in %d rounds", swaps.Load(), rounds)
	}
}
