package compat

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	ratelimiter "github.com/goredisson/ratelimiter"
)

// TestManyLimitersOneScriptCall: acquire calls of different limiters that
// queue behind a paused server are decided in one script call
// (docs/combining.md, "Many limiters"). Every Redisson version then sees,
// on each limiter, the budget those calls took: availablePermits, a
// tryAcquire of exactly what is left, and a refusal of one more.
func TestManyLimitersOneScriptCall(t *testing.T) {
	for _, v := range Versions {
		t.Run(v, func(t *testing.T) {
			ctx := ctxT(t, time.Minute)
			j := javaSide{peerFor(t, v)}
			c := rdb(t)
			keys := &largestScriptCall{}
			c.AddHook(keys)
			gc := ratelimiter.NewClient(c, ratelimiter.WithMemberFormat(formatFor(v)))
			const limiters, rate = 24, 10
			ls := make([]*ratelimiter.Limiter, limiters)
			for i := range ls {
				ls[i] = gc.Limiter(limName(t, fmt.Sprint(i)))
				check(t, errOnly(ls[i].TrySetRate(ctx, ratelimiter.Config{Rate: rate, Interval: time.Minute})), "trySetRate")
			}
			// The first calls take the flights and wait out the pause; the
			// others queue for them and go as one batch.
			check(t, c.Do(ctx, "CLIENT", "PAUSE", 250, "WRITE").Err(), "pause")
			var wg sync.WaitGroup
			for i, l := range ls {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if !must[bool](t, "tryAcquire")(l.TryAcquire(ctx, int64(i%3+1))) {
						t.Error("refused within the rate")
					}
				}()
			}
			wg.Wait()
			if n := keys.most.Load(); n <= 5 {
				t.Fatalf("the largest script call declared %d keys: no batch of limiters formed", n)
			}
			for i, l := range ls {
				left := int64(rate - (i%3 + 1))
				if got := must[int64](t, "availablePermits")(j.available(ctx, l.Name())); got != left {
					t.Errorf("%s: Redisson sees %d available, want %d", l.Name(), got, left)
				}
				if !must[bool](t, "tryAcquire")(j.tryAcquire(ctx, l.Name(), left)) {
					t.Errorf("%s: Redisson refused the %d left", l.Name(), left)
				}
				if must[bool](t, "tryAcquire")(j.tryAcquire(ctx, l.Name(), 1)) {
					t.Errorf("%s: Redisson got a permit beyond the rate", l.Name())
				}
			}
		})
	}
}

// largestScriptCall is a go-redis hook that keeps the most keys any
// EVAL or EVALSHA declared, alone or in a pipeline.
type largestScriptCall struct{ most atomic.Int64 }

func (h *largestScriptCall) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *largestScriptCall) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.see(cmd)
		return next(ctx, cmd)
	}
}

func (h *largestScriptCall) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.see(cmd)
		}
		return next(ctx, cmds)
	}
}

func (h *largestScriptCall) see(cmd redis.Cmder) {
	if n := cmd.Name(); n != "eval" && n != "evalsha" {
		return
	}
	if a := cmd.Args(); len(a) > 2 {
		if k, ok := a[2].(int); ok {
			for m := h.most.Load(); int64(k) > m && !h.most.CompareAndSwap(m, int64(k)); m = h.most.Load() {
			}
		}
	}
}
