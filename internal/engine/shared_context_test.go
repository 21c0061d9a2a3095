package engine

import (
	"context"
	"testing"
	"time"
)

type ctxKey struct{}

// TestSharedContext checks the context of one call made for several
// callers: the first caller's values, not ended by a caller leaving, the
// latest deadline, none when a caller has none, and no allocation when
// the callers' contexts can never end.
func TestSharedContext(t *testing.T) {
	id := func(c context.Context) context.Context { return c }
	first := context.WithValue(context.Background(), ctxKey{}, "first")
	soon, cancelSoon := context.WithTimeout(first, time.Hour)
	defer cancelSoon()
	later, cancelLater := context.WithTimeout(context.Background(), 2*time.Hour)
	defer cancelLater()

	ctx, cancel := SharedContext([]context.Context{soon, later}, id)
	defer cancel()
	if ctx.Value(ctxKey{}) != "first" {
		t.Error("the first caller's values are lost")
	}
	dl, ok := ctx.Deadline()
	if want, _ := later.Deadline(); !ok || !dl.Equal(want) {
		t.Errorf("deadline %v %v, want the latest, %v", dl, ok, want)
	}
	cancelSoon()
	if ctx.Err() != nil {
		t.Error("a caller leaving ended the shared call")
	}

	never, cancelNever := SharedContext([]context.Context{later, first}, id)
	defer cancelNever()
	if _, ok := never.Deadline(); ok || never.Done() != nil {
		t.Error("a caller without a deadline: the call has one, or can end")
	}

	both := []context.Context{first, first}
	if n := testing.AllocsPerRun(100, func() {
		c, cancel := SharedContext(both, id)
		cancel()
		_ = c
	}); n > 0 {
		t.Errorf("contexts that can never end: %v allocations, want 0", n)
	}
}
