package main

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"
)

// faultRand is the random source of a test's fault injection (when to
// kill a server or an agent): seeded from SLUICE_TEST_SEED, or from the
// clock, and the seed is logged, so that a failure's kill times can be
// asked for again.
func faultRand(t *testing.T) *rand.Rand {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SLUICE_TEST_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SLUICE_TEST_SEED=%q: %v", s, err)
		}
		seed = n
	}
	t.Logf("fault injection seeded with %d (SLUICE_TEST_SEED=%d repeats its delays)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed))
}
