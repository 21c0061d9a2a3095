package script

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter/internal/redistest"
	"github.com/goredisson/ratelimiter/wire"
)

// TestManyInstructions counts with callgrind what Redis executes per
// decision for 64 granted acquire calls of 64 limiters sent as a pipeline
// of 64 EVALSHAs and as one call of the many script (docs/combining.md,
// "Many limiters", quotes it). Counts repeat to a fraction of a percent,
// so it asserts the many script costs less; it logs both.
//
// Run: go test ./internal/script -run TestManyInstructions -v
func TestManyInstructions(t *testing.T) {
	if testing.Short() {
		t.Skip("callgrind: not in the quick suite")
	}
	redistest.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cg, rdb := redistest.Callgrind(t, ctx)
	c := New(rdb, Options{})
	const calls, rounds = 64, 10
	m := manyOf[scriptAcquire]
	// Each side decides on limiters of its own, each limiter once a
	// round: the same state (one record more each round) on both sides.
	side := func(name string) (keys [][]string) {
		for i := range calls {
			n := fmt.Sprintf("%s%d", name, i)
			setLimiters(t, ctx, c, 1_000_000, n)
			keys = append(keys, KeysOf(wire.KeysFor(n, "client")).Overall)
		}
		return keys
	}
	args := func() []any {
		return []any{"", string(wire.New(c.format, c.tag, 1)), formSingle, 1}
	}
	pipeKeys, manyKeys := side("pipe"), side("many")
	pipelined := func() error {
		pl := rdb.Pipeline()
		for _, k := range pipeKeys {
			pl.EvalSha(ctx, scriptAcquire.Hash(), k, args()...)
		}
		_, err := pl.Exec(ctx)
		return err
	}
	batched := func() error {
		var keys []string
		a := []any{calls}
		for _, k := range manyKeys {
			keys = append(keys, k...)
			a = append(a, len(k), 4)
			a = append(a, args()...)
		}
		v, err := m.s.Run(ctx, rdb, keys, a...).Slice()
		if err == nil && len(v) != calls {
			err = fmt.Errorf("%d replies for %d calls", len(v), calls)
		}
		for _, x := range v {
			if e, ok := x.(error); ok && err == nil {
				err = e
			}
		}
		return err
	}
	for _, s := range []*redis.Script{scriptAcquire, m.s} {
		if err := s.Load(ctx, rdb).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, warm := range []func() error{pipelined, batched} { // write each limiter's value key
		if err := warm(); err != nil {
			t.Fatal(err)
		}
	}
	count := func(f func() error) float64 {
		n, err := cg.Count(func() error {
			for range rounds {
				if err := f(); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return float64(n) / (rounds * calls)
	}
	p, b := count(pipelined), count(batched)
	t.Logf("REDIS INSTRUCTIONS per granted decision, %d limiters a round: a pipeline of EVALSHAs %.0f, one many-script call %.0f (%.3fx)", calls, p, b, b/p)
	if b >= p {
		t.Errorf("the many script costs Redis %.0f instructions per decision, a pipeline of EVALSHAs %.0f", b, p)
	}
}
