package backend

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrFenced: the destination refused a write, rename or removal because a
// writer with a newer fence (a later lease term of the same partition)
// has touched the file since: the caller is a server that lost the task
// to another and must leave the file alone.
var ErrFenced = errors.New("fenced: a newer owner holds the file")

// A Fence is a fencing token: the lease term under which a server holds
// the partition (the source endpoint) of the transfer writing a file.
// Terms of one partition only grow, so a destination that remembers the
// highest fence per file can refuse a writer that lost its lease but does
// not know it yet. Fences of different partitions are not comparable: a
// file written for two of them takes the newer one's.
type Fence struct {
	Partition string
	Term      int64
}

// String is the fence's wire form, TERM:PARTITION.
func (f Fence) String() string {
	return strconv.FormatInt(f.Term, 10) + ":" + f.Partition
}

// ParseFence reads a fence in its wire form.
func ParseFence(s string) (Fence, error) {
	t, p, ok := strings.Cut(s, ":")
	term, err := strconv.ParseInt(t, 10, 64)
	if !ok || err != nil || term < 0 || p == "" {
		return Fence{}, fmt.Errorf("%w: fence %q (want TERM:PARTITION)", ErrInvalid, s)
	}
	return Fence{Partition: p, Term: term}, nil
}

type fenceKey struct{}

// WithFence returns a context whose requests to a destination carry f:
// backends that support fencing (the sluice agent's) send it with every
// write, rename and removal made with the context.
func WithFence(ctx context.Context, f Fence) context.Context {
	return context.WithValue(ctx, fenceKey{}, f)
}

// FenceFrom returns the fence WithFence put in ctx.
func FenceFrom(ctx context.Context) (Fence, bool) {
	f, ok := ctx.Value(fenceKey{}).(Fence)
	return f, ok
}
