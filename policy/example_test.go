package policy_test

import (
	"fmt"
	"time"

	"github.com/sluice-dtn/sluice/policy"
)

// A client asks for streams, grows its allocation by updating, learns of
// a shrink at its next update and releases.
func ExampleService() {
	nersc2unl := policy.Pair{Src: "dtn.nersc.gov", Dst: "red.unl.edu"}
	svc, err := policy.New(policy.Config{
		Pairs: map[policy.Pair]policy.Params{nersc2unl: policy.DefaultParams()},
	})
	if err != nil {
		panic(err)
	}
	now := time.Date(2013, 7, 9, 18, 41, 0, 0, time.UTC)
	me := policy.Caller{Client: "client0", VO: "atlas"}

	a, _ := svc.Request(now, policy.Request{Pair: nersc2unl, Client: me.Client, VO: me.VO})
	fmt.Println("initial:", a.Streams)
	a, _ = svc.Update(now.Add(time.Minute), a.ID, me, 0)
	fmt.Println("after an update:", a.Streams)

	svc.Shrink(now.Add(2*time.Minute), a.ID, 8, "cms has priority")
	a, _ = svc.Update(now.Add(3*time.Minute), a.ID, me, a.Streams)
	fmt.Printf("next update: %d streams, %d taken (%s)\n", a.Streams, a.Shrunk, a.Reason)

	fmt.Println(svc.Release(now.Add(4*time.Minute), a.ID, me))
	// Output:
	// initial: 16
	// after an update: 20
	// next update: 12 streams, 8 taken (cms has priority)
	// <nil>
}

// The adaptive client of Fig. 3 with Table V's parameters, on scripted
// rates in bytes per second.
func ExampleAdaptive() {
	client, err := policy.NewAdaptive(policy.AdaptiveParams{Ci: 4, Cmax: 8, Delta: 1, D: 2, P: 4, T: 1e6})
	if err != nil {
		panic(err)
	}
	c := client.Start(32) // 32 streams granted
	fmt.Println("start:", c)
	for _, rate := range []float64{100e6, 120e6, 120.5e6, 90e6} {
		client.Completed(c) // a batch of c files done
		if client.Due() {
			c = client.Adapt(32, rate)
		}
		fmt.Println(rate/1e6, "MB/s:", c)
	}
	// Output:
	// start: 4
	// 100 MB/s: 5
	// 120 MB/s: 6
	// 120.5 MB/s: 6
	// 90 MB/s: 5
}
