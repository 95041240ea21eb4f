package clock

import (
	"testing"
	"time"
)

func TestFake(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := NewFake(t0)
	tests := []struct {
		name string
		do   func()
		want time.Time
	}{
		{"starts where told", func() {}, t0},
		{"advances", func() { c.Advance(1500 * time.Millisecond) }, t0.Add(1500 * time.Millisecond)},
		{"never goes back by Advance", func() { c.Advance(-time.Hour) }, t0.Add(1500 * time.Millisecond)},
		{"never goes back by Set", func() { c.Set(t0) }, t0.Add(1500 * time.Millisecond)},
		{"sets forward", func() { c.Set(t0.Add(time.Hour)) }, t0.Add(time.Hour)},
	}
	for _, tc := range tests {
		tc.do()
		if got := c.Now(); !got.Equal(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	var _ Clock = System{}
	var _ Clock = c
}
