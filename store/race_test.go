//go:build race

package store

// raceEnabled: the race detector slows the SQLite driver (C translated to
// Go) by over an order of magnitude, so timing limits are not enforced.
const raceEnabled = true
