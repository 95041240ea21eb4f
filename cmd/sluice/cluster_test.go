package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/api"
	"github.com/sluice-dtn/sluice/client"
	"github.com/sluice-dtn/sluice/store"
	"github.com/sluice-dtn/sluice/store/storetest"
)

// serverProc is one of several `sluice serve` processes on one database.
type serverProc struct {
	id   string
	addr string
	p    *proc
	mu   sync.Mutex
	up   bool      // running (not killed by the test)
	from time.Time // since when it is up and listening
}

func (s *serverProc) alive() (bool, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.up, s.from
}

func (s *serverProc) set(up bool) {
	s.mu.Lock()
	s.up = up
	if up {
		s.from = time.Now()
	}
	s.mu.Unlock()
}

// TestSeveralServers (docs/SCALING.md): three servers on one PostgreSQL
// database and four agents, each agent listing every server. A 500-file job,
// submitted through one server, completes while the servers are killed
// with SIGKILL one after another (never all at once; some come back
// before their leases expire, others after, so both a restart and a
// fail-over happen). Every file arrives once, intact; no endpoint is
// scheduled by two servers at once (the audit log's terms per partition
// never go down and each term is one server's); and the API answers on
// every live server throughout, with no error lasting longer than a
// lease TTL.
func TestSeveralServers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills processes")
	}
	admin := os.Getenv(storetest.PostgresEnv)
	if admin == "" {
		t.Skip("needs PostgreSQL (" + storetest.PostgresEnv + ")")
	}
	db := storetest.FreshPostgres(t, admin)
	const ttl = 4 * time.Second
	dir := t.TempDir()
	flags := func(id, addr string) []string {
		return []string{"serve", "--listen", addr, "--db", db, "--data-dir", filepath.Join(dir, "data-"+id),
			"--server-id", id, "--lease-ttl", fmt.Sprint(ttl.Seconds()), "--heartbeat-timeout", "4"}
	}
	var servers []*serverProc
	for i := 1; i <= 3; i++ {
		s := &serverProc{id: fmt.Sprintf("s%d", i), addr: freeAddr(t)}
		s.p = startProc(t, flags(s.id, s.addr)...)
		waitListening(t, s.addr, s.p)
		s.set(true)
		servers = append(servers, s)
	}
	// The first server created the tokens.
	data1 := filepath.Join(dir, "data-s1")
	tok, err := os.ReadFile(filepath.Join(data1, "admin.token"))
	if err != nil {
		t.Fatalf("admin token: %v\n%s", err, servers[0].p.output())
	}
	adminTok := strings.TrimSpace(string(tok))
	clients := map[string]*client.Client{}
	for _, s := range servers {
		if clients[s.id], err = client.New("http://"+s.addr, adminTok, &http.Client{Timeout: 5 * time.Second}); err != nil {
			t.Fatal(err)
		}
	}
	// Four agents, each listing the servers in a different order; each
	// endpoint moves at most 40 MB/s (the agents' emulation), so that the
	// job lasts long enough for several kills.
	emu := filepath.Join(dir, "emul.json")
	if err := os.WriteFile(emu, []byte(`{"capacity_bps": 40e6}`), 0o644); err != nil {
		t.Fatal(err)
	}
	roots := map[string]string{}
	agents := map[string]*proc{}
	for i := 1; i <= 4; i++ {
		name := fmt.Sprintf("a%d", i)
		roots[name] = filepath.Join(dir, name)
		if err := os.MkdirAll(roots[name], 0o755); err != nil {
			t.Fatal(err)
		}
		var list []string
		for k := range servers {
			list = append(list, "http://"+servers[(i+k)%3].addr)
		}
		addr := freeAddr(t)
		agents[name] = startProc(t, "agent", "--listen", addr, "--root", roots[name], "--name", name,
			"--server", strings.Join(list, ","), "--join-token", "@"+filepath.Join(data1, "join.token"), "--emulate", emu)
		waitListening(t, addr, agents[name])
	}
	st, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	// Wait until every endpoint is up and the partitions are shared out.
	deadline := time.Now().Add(30 * time.Second)
	for {
		ls, _ := st.Leases(ctx)
		owners := map[string]bool{}
		for _, l := range ls {
			if l.Expires.After(time.Now()) {
				owners[l.Owner] = true
			}
		}
		es, _ := clients["s2"].Endpoints(ctx)
		up := 0
		for _, e := range es {
			if e.Up {
				up++
			}
		}
		if len(ls) == 4 && len(owners) >= 2 && up == 4 {
			t.Logf("leases: %+v", ls)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("partitions not shared out: leases %+v, %d endpoints up\n%s", ls, up, servers[0].p.output())
		}
		time.Sleep(200 * time.Millisecond)
	}

	// 500 files, sources on every agent, each to the next agent.
	const n = 500
	r := rand.New(rand.NewPCG(7, 10))
	var job api.JobIn
	srcOf := map[int]string{}
	for i := 0; i < n; i++ {
		src := fmt.Sprintf("a%d", 1+i%4)
		dst := fmt.Sprintf("a%d", 1+(i+1)%4)
		rel := fmt.Sprintf("d/%03d", i)
		size := 64<<10 + r.Int64N(3<<20)
		if i%25 == 0 {
			size = 24 << 20
		}
		p := filepath.Join(roots[src], filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		fastRandom(t, p, size, uint64(1000+i))
		srcOf[i] = src
		job.Files = append(job.Files, api.FileIn{Source: "sluice://" + src + "/" + rel, Destination: "sluice://" + dst + "/out/" + rel})
	}
	j, _, err := clients["s2"].Submit(ctx, job)
	if err != nil {
		t.Fatal(err)
	}

	// Watch the destinations: a file put in place twice shows up as a new
	// inode under the same name.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var replacedMu sync.Mutex
	var replaced []string
	wg.Add(1)
	go func() {
		defer wg.Done()
		seen := map[string]uint64{}
		for {
			for name, root := range roots {
				ents, _ := os.ReadDir(filepath.Join(root, "out", "d"))
				for _, e := range ents {
					if strings.HasPrefix(e.Name(), ".") {
						continue
					}
					key := name + "/" + e.Name()
					var sst syscall.Stat_t
					if syscall.Stat(filepath.Join(root, "out", "d", e.Name()), &sst) != nil {
						continue
					}
					if ino, ok := seen[key]; ok && ino != sst.Ino {
						replacedMu.Lock()
						replaced = append(replaced, key)
						replacedMu.Unlock()
					}
					seen[key] = sst.Ino
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(25 * time.Millisecond):
			}
		}
	}()
	// Ask every live server about the job all along; record the longest
	// time a live server kept failing.
	type streak struct {
		since   time.Time
		longest time.Duration
		calls   int
		fails   int
	}
	streaks := make([]*streak, len(servers))
	for i := range streaks {
		streaks[i] = &streak{}
	}
	var streakMu sync.Mutex
	for i, s := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
				up, from := s.alive()
				if !up || time.Since(from) < 200*time.Millisecond {
					streakMu.Lock()
					streaks[i].since = time.Time{}
					streakMu.Unlock()
					continue
				}
				_, err := clients[s.id].Job(ctx, j.ID)
				if up2, from2 := s.alive(); !up2 || from2 != from {
					continue // killed meanwhile: not the API's fault
				}
				streakMu.Lock()
				st := streaks[i]
				st.calls++
				if err != nil {
					st.fails++
					if st.since.IsZero() {
						st.since = time.Now()
					}
					st.longest = max(st.longest, time.Since(st.since))
				} else {
					st.since = time.Time{}
				}
				streakMu.Unlock()
			}
		}()
	}
	// Kill the servers one after another: each comes back either before
	// its leases expire (a restart: it takes its partitions back) or
	// after (the others have taken them over).
	done := make(chan api.JobOut, 1)
	go func() {
		for {
			cur, err := clients["s3"].Job(ctx, j.ID)
			if err != nil {
				cur, err = clients["s1"].Job(ctx, j.ID)
			}
			if err == nil && cur.State != store.StateActive {
				done <- cur
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	kills, stalls := 0, 0
	var stalled *serverProc
	var final api.JobOut
	faults := faultRand(t)
	timeout := time.After(5 * time.Minute)
loop:
	for k := 0; ; k++ {
		select {
		case final = <-done:
			break loop
		case <-timeout:
			close(stop)
			wg.Wait()
			t.Fatalf("job not finished after 5 minutes, %d kills\n%s", kills, servers[1].p.output())
		case <-time.After(time.Duration(1500+faults.IntN(1500)) * time.Millisecond):
		}
		if kills+stalls >= 9 {
			continue
		}
		s := servers[k%3]
		s.set(false)
		if k == 2 {
			// A stall instead of a death: the server is stopped past its
			// leases' expiry, the others take its partitions, and when it
			// runs again its writes are refused and it lets go.
			s.p.cmd.Process.Signal(syscall.SIGSTOP)
			t.Logf("kill -STOP %s for %s", s.id, ttl+3*time.Second)
			time.Sleep(ttl + 3*time.Second)
			s.p.cmd.Process.Signal(syscall.SIGCONT)
			s.set(true)
			stalls++
			stalled = s
			continue
		}
		s.p.kill()
		kills++
		down := 1500 * time.Millisecond
		if k%2 == 1 {
			down = ttl + 2*time.Second
		}
		t.Logf("kill -9 %s (down for %s)", s.id, down)
		select {
		case final = <-done:
			s.p.start()
			waitListening(t, s.addr, s.p)
			s.set(true)
			break loop
		case <-time.After(down):
		}
		s.p.start()
		waitListening(t, s.addr, s.p)
		s.set(true)
	}
	close(stop)
	wg.Wait()
	if kills < 3 {
		t.Errorf("only %d kills before the job finished: the test did not test fail-over", kills)
	}
	if stalled != nil {
		// It held partitions when it stopped (every server does by then):
		// it must have noticed, on waking, that others took them.
		out := stalled.p.output()
		if !strings.Contains(out, "lost partition") && !strings.Contains(out, "write was refused") {
			t.Errorf("the stalled server %s did not notice it lost its partitions:\n%s", stalled.id, out)
		}
	}
	if final.State != store.StateDone || final.FilesDone != n {
		t.Fatalf("job ended %s with %d/%d files done (%d failed)", final.State, final.FilesDone, n, final.FilesFailed)
	}
	for _, k := range replaced {
		t.Errorf("file %s was put in place twice (its inode changed)", k)
	}
	for i, s := range servers {
		t.Logf("API on %s: %d calls while up, %d failed, longest failing stretch %s", s.id, streaks[i].calls, streaks[i].fails, streaks[i].longest)
		if streaks[i].longest > ttl {
			t.Errorf("API on live server %s failed for %s (> lease TTL %s)", s.id, streaks[i].longest, ttl)
		}
	}
	// Every file intact.
	tasks, err := st.Tasks(ctx, j.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	part := map[int64]string{}
	for _, tk := range tasks {
		part[tk.ID] = tk.SrcEndpoint
		i := tk.Index
		src := filepath.Join(roots[srcOf[i]], "d", fmt.Sprintf("%03d", i))
		dst := filepath.Join(roots[fmt.Sprintf("a%d", 1+(i+1)%4)], "out", "d", fmt.Sprintf("%03d", i))
		if tk.State != store.StateDone || tk.Checksum == "" {
			t.Errorf("file %d: %s, checksum %q, error %q", i, tk.State, tk.Checksum, tk.Error)
		}
		if !sameContent(t, src, dst) {
			t.Errorf("file %d differs", i)
		}
	}
	for name, root := range roots {
		if parts, _ := filepath.Glob(filepath.Join(root, "out", "d", ".*.sluice-part")); len(parts) > 0 {
			t.Errorf("temporary files left at %s: %v", name, parts)
		}
	}
	// The audit log: each file done once; per partition the terms never
	// go down, and each term belongs to one server.
	audit, err := st.Audit(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	doneCount := map[int64]int{}
	lastTerm := map[string]int64{}
	termActor := map[string]string{}
	actors := map[string]int{}
	for _, a := range audit {
		if a.TaskID == 0 || a.Term == 0 {
			continue
		}
		p := part[a.TaskID]
		if a.To == store.StateDone {
			doneCount[a.TaskID]++
		}
		if a.Term < lastTerm[p] {
			t.Errorf("partition %s: an entry of term %d after term %d (%+v)", p, a.Term, lastTerm[p], a)
		}
		lastTerm[p] = max(lastTerm[p], a.Term)
		key := fmt.Sprintf("%s/%d", p, a.Term)
		if prev, ok := termActor[key]; ok && prev != a.Actor {
			t.Errorf("partition %s term %d has two schedulers: %s and %s", p, a.Term, prev, a.Actor)
		}
		termActor[key] = a.Actor
		actors[a.Actor]++
	}
	for _, tk := range tasks {
		if doneCount[tk.ID] != 1 {
			t.Errorf("file %d: %d done entries in the audit log", tk.Index, doneCount[tk.ID])
		}
	}
	keys := make([]string, 0, len(termActor))
	for k := range termActor {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	t.Logf("%d kills, %d stalls; partition terms and their schedulers: %v; entries per scheduler: %v", kills, stalls, func() []string {
		var out []string
		for _, k := range keys {
			out = append(out, k+"="+termActor[k])
		}
		return out
	}(), actors)
	if len(actors) < 2 {
		t.Errorf("only %d server(s) scheduled anything: %v", len(actors), actors)
	}
}
