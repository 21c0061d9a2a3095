package ratelimiter_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/wire"
)

// setupParts configures one limiter per cfg on one client with a fake
// clock and returns the client and the limiters.
func setupParts(t *testing.T, cfgs []ratelimiter.Config, opts ...ratelimiter.Option) (*ratelimiter.Client, []*ratelimiter.Limiter, *redis.Client, *fakeClock) {
	t.Helper()
	rdb := newRedis(t)
	clock := newFakeClock()
	c := ratelimiter.NewClient(rdb, append([]ratelimiter.Option{clock.option()}, opts...)...)
	base := uniqueName(t)
	var parts []*ratelimiter.Limiter
	for i, cfg := range cfgs {
		l := c.Limiter(fmt.Sprintf("%s:%d", base, i))
		ok, err := l.TrySetRate(context.Background(), cfg)
		require.NoError(t, err)
		require.True(t, ok)
		parts = append(parts, l)
	}
	return c, parts, rdb, clock
}

func names(parts []*ratelimiter.Limiter) []string {
	var out []string
	for _, l := range parts {
		out = append(out, l.Name())
	}
	return out
}

var combiningModes = map[string][]ratelimiter.Option{
	"combining": nil,
	"direct":    {ratelimiter.WithMaxBatch(1)},
}

// TestCompositeAllOrNothing: a composite takes its permits from every part
// or from none; a refusal by one part leaves the others untouched; the
// Result describes the part that binds.
func TestCompositeAllOrNothing(t *testing.T) {
	ctx := context.Background()
	for mode, opts := range combiningModes {
		t.Run(mode, func(t *testing.T) {
			c, p, rdb, clock := setupParts(t, []ratelimiter.Config{
				{Rate: 3, Interval: time.Second},
				{Rate: 5, Interval: time.Hour},
			}, opts...)
			sec, hour := p[0], p[1]
			a := c.All(sec.Name(), hour.Name())
			for i := int64(1); i <= 3; i++ {
				res, err := a.Allow(ctx, 1)
				require.NoError(t, err)
				require.True(t, res.Granted)
				require.Equal(t, 3-i, res.Remaining, "the fewest left among the parts")
				require.Equal(t, int64(3), res.Limit)
				require.Equal(t, time.Second, res.Interval)
				require.Equal(t, 0, res.Part, "the per-second part binds")
			}
			res, err := a.Allow(ctx, 1)
			require.NoError(t, err)
			require.False(t, res.Granted)
			require.Equal(t, 1003*time.Millisecond, res.RetryAfter, "the per-second part's wait")
			require.Equal(t, 0, res.Part)
			require.Equal(t, int64(3), recordPermits(t, rdb, sec.Keys().Permits))
			require.Equal(t, int64(3), recordPermits(t, rdb, hour.Keys().Permits))

			clock.Advance(time.Second)
			res, err = a.Allow(ctx, 2)
			require.NoError(t, err)
			require.True(t, res.Granted)
			require.Equal(t, int64(0), res.Remaining)
			require.Equal(t, int64(5), res.Limit, "the hourly part has the fewest left")
			require.Equal(t, time.Hour, res.Interval)
			require.Equal(t, 1, res.Part)

			// The per-second part has a permit, the hourly one none: the
			// composite is refused for the hour's wait and takes nothing.
			ok, err := a.TryAcquire(ctx, 1)
			require.NoError(t, err)
			require.False(t, ok)
			res, err = a.Allow(ctx, 1)
			require.NoError(t, err)
			require.False(t, res.Granted)
			require.Equal(t, time.Hour+3*time.Millisecond-time.Second, res.RetryAfter)
			require.Equal(t, int64(5), res.Limit)
			require.Equal(t, 1, res.Part, "the hourly part waits longest")
			require.Equal(t, int64(0), res.Remaining)
			require.Equal(t, int64(2), recordPermits(t, rdb, sec.Keys().Permits))
			require.Equal(t, int64(5), recordPermits(t, rdb, hour.Keys().Permits))
			n, err := sec.AvailablePermits(ctx)
			require.NoError(t, err)
			require.Equal(t, int64(1), n, "the refused composite took nothing from the per-second part")
			ok, err = sec.TryAcquire(ctx, 1)
			require.NoError(t, err)
			require.True(t, ok)
		})
	}
}

// TestCompositeHints: a refusal's hint is the longest of the parts' own
// hints (each part's Allow on the same state gives the same figure), and
// names the part that waits longest.
func TestCompositeHints(t *testing.T) {
	ctx := context.Background()
	c, p, rdb, clock := setupParts(t, []ratelimiter.Config{
		{Rate: 4, Interval: 10 * time.Second},
		{Rate: 5, Interval: time.Minute},
		{Rate: 9, Interval: 30 * time.Second, Mode: ratelimiter.PerClient},
	})
	a := c.All(names(p)...)
	take := func(n int64) {
		ok, err := a.TryAcquire(ctx, n)
		require.NoError(t, err)
		require.True(t, ok)
	}
	take(2)
	clock.Advance(3 * time.Second)
	take(2) // part 0 is empty, part 1 has 1 left, part 2 has 5
	clock.Advance(time.Second)
	want := map[int64]time.Duration{
		1: 6003 * time.Millisecond,  // part 0: its first record (2 permits) expires in 6 s
		2: 56003 * time.Millisecond, // part 1: 1 missing, its first record expires in 56 s
		3: 56003 * time.Millisecond, // part 1: 2 missing, its first record holds 2
		4: 59003 * time.Millisecond, // part 1: 3 missing, its second record expires in 59 s
	}
	for n, hint := range want {
		before := partsPermits(t, rdb, p)
		res, err := a.Allow(ctx, n)
		require.NoError(t, err)
		require.False(t, res.Granted)
		require.Equal(t, hint, res.RetryAfter, "n=%d", n)
		var longest time.Duration
		var limit int64
		part := -1
		for i, l := range p {
			avail, err := l.AvailablePermits(ctx)
			require.NoError(t, err)
			if avail >= n {
				continue // its Allow would grant: the part does not wait
			}
			r, err := l.Allow(ctx, n)
			require.NoError(t, err)
			require.False(t, r.Granted)
			if r.RetryAfter > longest {
				longest, limit, part = r.RetryAfter, r.Limit, i
			}
		}
		require.Equal(t, longest, res.RetryAfter, "n=%d: the longest of the parts' own hints", n)
		require.Equal(t, limit, res.Limit, "n=%d: the part that waits longest", n)
		require.Equal(t, part, res.Part, "n=%d: the part that waits longest", n)
		require.Equal(t, before, partsPermits(t, rdb, p), "a refusal takes nothing")
	}
}

// TestCompositeErrors: bad sets of names fail before anything is sent;
// Redis-side refusals name the part.
func TestCompositeErrors(t *testing.T) {
	ctx := context.Background()
	c, p, rdb, _ := setupParts(t, []ratelimiter.Config{{Rate: 5, Interval: time.Hour}, {Rate: 2, Interval: time.Hour}})
	for mode, opts := range combiningModes {
		t.Run(mode, func(t *testing.T) {
			c := ratelimiter.NewClient(rdb, opts...)
			missing := p[0].Name() + ":missing"
			before := snapshot(t, rdb, p[0])
			for op, call := range compositeCalls(c.All(p[0].Name(), missing), 1) {
				err := call()
				require.ErrorIs(t, err, ratelimiter.ErrNotInitialized, op)
				var le *ratelimiter.LimiterError
				require.ErrorAs(t, err, &le, op)
				require.Equal(t, missing, le.Limiter, op)
			}
			require.Equal(t, before, snapshot(t, rdb, p[0]), "nothing taken from the configured part")

			for op, call := range compositeCalls(c.All(p[0].Name(), p[1].Name()), 3) {
				err := call()
				require.ErrorIs(t, err, ratelimiter.ErrPermitsExceedRate, op)
				require.Contains(t, err.Error(), fmt.Sprintf("%q", p[1].Name()), op)
			}
			require.Equal(t, int64(0), partsPermits(t, rdb, p))
		})
	}

	tooMany := make([]string, ratelimiter.MaxParts+1)
	for i := range tooMany {
		tooMany[i] = fmt.Sprintf("%s:%d", p[0].Name(), i)
	}
	for what, a := range map[string]*ratelimiter.Composite{
		"none":       c.All(),
		"too many":   c.All(tooMany...),
		"empty name": c.All(p[0].Name(), ""),
		"twice":      c.All(p[0].Name(), p[1].Name(), p[0].Name()),
	} {
		for op, call := range compositeCalls(a, 1) {
			require.ErrorIs(t, call(), ratelimiter.ErrInvalidArgument, "%s: %s", what, op)
		}
	}
	a := c.All(p[0].Name(), p[1].Name())
	_, err := a.TryAcquireTimeout(ctx, 1, -time.Second)
	require.ErrorIs(t, err, ratelimiter.ErrInvalidArgument)
	var le *ratelimiter.LimiterError
	require.True(t, errors.As(err, &le))
	require.Equal(t, p[0].Name()+"+"+p[1].Name(), le.Limiter, "an error of no one part names the composite")
	for _, n := range []int64{0, -1, ratelimiter.MaxPermits + 1} {
		for op, call := range compositeCalls(a, n) {
			require.ErrorIs(t, call(), ratelimiter.ErrInvalidArgument, "%s(%d)", op, n)
		}
	}
	require.Equal(t, int64(0), partsPermits(t, rdb, p), "nothing was taken")
}

// partsPermits sums the permits the parts' records hold.
func partsPermits(t *testing.T, rdb *redis.Client, p []*ratelimiter.Limiter) int64 {
	var sum int64
	for _, l := range p {
		sum += recordPermits(t, rdb, l.Keys().Permits)
	}
	return sum
}

// compositeCalls are a's four acquisitions of n permits, each returning
// its error.
func compositeCalls(a *ratelimiter.Composite, n int64) map[string]func() error {
	ctx := context.Background()
	return map[string]func() error{
		"Allow":             func() error { _, err := a.Allow(ctx, n); return err },
		"TryAcquire":        func() error { _, err := a.TryAcquire(ctx, n); return err },
		"TryAcquireTimeout": func() error { _, err := a.TryAcquireTimeout(ctx, n, time.Second); return err },
		"Acquire":           func() error { return a.Acquire(ctx, n) },
	}
}

// TestCompositeConcurrent: composites on two clients (combining and not)
// race single-limiter callers of both parts. Every part's records hold
// exactly the permits granted to the calls that used it: no part lost
// permits to a refused composite, and no part went over its rate.
func TestCompositeConcurrent(t *testing.T) {
	ctx := context.Background()
	c, p, rdb, clock := setupParts(t, []ratelimiter.Config{
		{Rate: 40, Interval: time.Hour},
		{Rate: 25, Interval: time.Hour, Mode: ratelimiter.PerClient},
	})
	direct := ratelimiter.NewClient(rdb, clock.option(), ratelimiter.WithMaxBatch(1), ratelimiter.WithClientID(c.ID()))
	var mu sync.Mutex
	var comp, single [2]int64
	var refusals int
	var wg sync.WaitGroup
	run := func(take func(context.Context, int64) (bool, error), n int64, count *int64) {
		defer wg.Done()
		for i := 0; i < 20; i++ {
			ok, err := take(ctx, n)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			if ok {
				*count += n
			} else {
				refusals++
			}
			mu.Unlock()
		}
	}
	for g := 0; g < 8; g++ {
		cl := c
		if g%2 == 1 {
			cl = direct
		}
		wg.Add(1)
		go run(cl.All(p[0].Name(), p[1].Name()).TryAcquire, int64(g%3+1), &comp[g%2])
	}
	for g := 0; g < 3; g++ {
		wg.Add(2)
		go run(p[0].TryAcquire, int64(g%2+1), &single[0])
		go run(p[1].TryAcquire, 1, &single[1])
	}
	wg.Wait()
	composite := comp[0] + comp[1]
	require.Positive(t, refusals)
	require.Positive(t, composite)
	sum0, sum1 := recordPermits(t, rdb, p[0].Keys().Permits), recordPermits(t, rdb, p[1].Keys().ClientPermits)
	require.Equal(t, composite+single[0], sum0)
	require.Equal(t, composite+single[1], sum1)
	require.LessOrEqual(t, sum0, int64(40))
	require.LessOrEqual(t, sum1, int64(25))
	require.Equal(t, fmt.Sprint(40-sum0), rdb.Get(ctx, p[0].Keys().Value).Val())
	require.Equal(t, fmt.Sprint(25-sum1), rdb.Get(ctx, p[1].Keys().ClientValue).Val())
}

// TestCompositeWindows: composite and single-limiter callers, combined and
// not, race while the clock moves on; every record any call wrote is
// collected, and in every sliding window each part holds at most its rate.
// A composite's record is the same member, at the same time, in every part.
func TestCompositeWindows(t *testing.T) {
	ctx := context.Background()
	rates := []int64{10, 25}
	c, p, rdb, clock := setupParts(t, []ratelimiter.Config{
		{Rate: rates[0], Interval: time.Second},
		{Rate: rates[1], Interval: 5 * time.Second},
	})
	direct := ratelimiter.NewClient(rdb, clock.option(), ratelimiter.WithMaxBatch(1))
	type rec struct {
		score   int64
		permits int64
	}
	seen := [2]map[string]rec{{}, {}}
	collect := func() {
		for i, l := range p {
			for _, z := range rdb.ZRangeWithScores(ctx, l.Keys().Permits, 0, -1).Val() {
				m := z.Member.(string)
				seen[i][m] = rec{int64(z.Score), recordPermitsOf(m)}
			}
		}
	}
	var refused int
	var mu sync.Mutex
	for phase := 0; phase < 40; phase++ {
		var wg sync.WaitGroup
		takers := []func(context.Context, int64) (bool, error){
			c.All(p[0].Name(), p[1].Name()).TryAcquire,
			c.All(p[1].Name(), p[0].Name()).TryAcquire,
			direct.All(p[0].Name(), p[1].Name()).TryAcquire,
			p[0].TryAcquire, p[1].TryAcquire,
			direct.Limiter(p[0].Name()).TryAcquire,
		}
		for g, take := range takers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 3; i++ {
					ok, err := take(ctx, int64((g+i)%2+1))
					if err != nil {
						t.Error(err)
						return
					}
					if !ok {
						mu.Lock()
						refused++
						mu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
		collect()
		clock.Advance(time.Duration(100+phase*37%600) * time.Millisecond)
	}
	require.Positive(t, refused)
	shared := 0
	for m, r := range seen[0] {
		if r1, ok := seen[1][m]; ok {
			require.Equal(t, r, r1, "a composite's record is the same in every part")
			shared++
		}
	}
	require.Positive(t, shared, "composites granted")
	for i, interval := range []int64{1000, 5000} {
		var total int64
		for _, end := range seen[i] {
			var in int64
			for _, r := range seen[i] {
				if r.score > end.score-interval && r.score <= end.score {
					in += r.permits
				}
			}
			require.LessOrEqual(t, in, rates[i], "part %d, window ending at %d", i, end.score)
			total += end.permits
		}
		require.Greater(t, total, 2*rates[i], "part %d: several windows were filled", i)
	}
}

// recordPermitsOf reads the permits of one record.
func recordPermitsOf(m string) int64 {
	d, err := wire.Decode([]byte(m))
	if err != nil {
		return 1 << 40 // fails the window check
	}
	return int64(d.Permits)
}

// mostInWindow returns the most permits that records hold within any
// window (end-w, end] that ends at one of them.
func mostInWindow(records []redis.Z, w time.Duration) int64 {
	var most int64
	for _, end := range records {
		var in int64
		for _, r := range records {
			if r.Score > end.Score-float64(w.Milliseconds()) && r.Score <= end.Score {
				in += recordPermitsOf(r.Member.(string))
			}
		}
		most = max(most, in)
	}
	return most
}

// TestCompositeCombining: composite calls that arrive while one is in
// flight share the next script call (one record per part for the call),
// whatever the order of the names; each gets its own verdict.
func TestCompositeCombining(t *testing.T) {
	ctx := context.Background()
	var seen decisions
	c, p, rdb, _ := setupParts(t, []ratelimiter.Config{{Rate: 8, Interval: time.Hour}, {Rate: 20, Interval: time.Hour}}, seen.hooks())
	ab, ba := c.All(p[0].Name(), p[1].Name()), c.All(p[1].Name(), p[0].Name())
	pauseScripts(t, rdb, 300*time.Millisecond)
	results := make([]ratelimiter.Result, 5)
	errs := make([]error, 5)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); results[0], errs[0] = ab.Allow(ctx, 1) }()
	time.Sleep(20 * time.Millisecond) // lets it reach Redis; the queueing below is what the test checks
	for i, ask := range []struct {
		a *ratelimiter.Composite
		n int64
	}{{ab, 3}, {ba, 5}, {ab, 9}, {ba, 2}} {
		wg.Add(1)
		go func() { defer wg.Done(); results[i+1], errs[i+1] = ask.a.Allow(ctx, ask.n) }()
		eventually(t, "request queued", func() bool { return ratelimiter.CompositePending(ab) == i+1 })
	}
	wg.Wait()
	for _, i := range []int{0, 1, 4} {
		require.NoError(t, errs[i])
		require.True(t, results[i].Granted, "request %d", i)
	}
	require.NoError(t, errs[2])
	require.False(t, results[2].Granted, "5 asked, 4 left in part 0")
	require.ErrorIs(t, errs[3], ratelimiter.ErrPermitsExceedRate)
	require.Contains(t, errs[3].Error(), p[0].Name())
	require.Equal(t, int64(2), results[4].Remaining)
	for _, l := range p {
		require.Equal(t, int64(6), recordPermits(t, rdb, l.Keys().Permits))
		require.Equal(t, int64(2), rdb.ZCard(ctx, l.Keys().Permits).Val(), "one record per part per script call")
	}
	batches := map[int]int{}
	for _, d := range seen.list() {
		batches[d.Batch]++
		require.Contains(t, []string{ab.Parts()[0].Name() + "+" + ab.Parts()[1].Name(), ba.Parts()[0].Name() + "+" + ba.Parts()[1].Name()}, d.Limiter)
	}
	require.Equal(t, map[int]int{1: 1, 4: 4}, batches)
}

// TestCompositeAcquire: blocked composite callers wait in one queue for the
// whole set and get their permits without any part going over its rate;
// waits that cannot end in time return at once.
func TestCompositeAcquire(t *testing.T) {
	ctx := context.Background()
	for mode, opts := range combiningModes {
		t.Run(mode, func(t *testing.T) {
			rdb := newRedis(t)
			c := ratelimiter.NewClient(rdb, opts...)
			base := uniqueName(t)
			fast, slow := c.Limiter(base+":fast"), c.Limiter(base+":slow")
			_, err := fast.TrySetRate(ctx, ratelimiter.Config{Rate: 2, Interval: 200 * time.Millisecond})
			require.NoError(t, err)
			_, err = slow.TrySetRate(ctx, ratelimiter.Config{Rate: 10, Interval: time.Hour})
			require.NoError(t, err)
			a := c.All(fast.Name(), slow.Name())
			var wg sync.WaitGroup
			for g := 0; g < 6; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := a.Acquire(ctx, 1+int64(g%2)); err != nil {
						t.Error(err)
					}
				}()
			}
			if mode == "combining" {
				eventually(t, "waiters queued", func() bool { return ratelimiter.CompositeWaiters(a) >= 2 })
			}
			wg.Wait()
			// The hourly part keeps every record; each is the same in the
			// fast part, whose expired records later calls removed.
			records := rdb.ZRangeWithScores(ctx, slow.Keys().Permits, 0, -1).Val()
			require.LessOrEqual(t, mostInWindow(records, 200*time.Millisecond), int64(2), "at most 2 permits in 200 ms")
			require.Equal(t, int64(9), recordPermits(t, rdb, slow.Keys().Permits))

			// One permit left in the hourly part: a wait for 2 cannot end
			// within a minute or before the deadline.
			ok, err := a.TryAcquireTimeout(ctx, 2, time.Minute)
			require.NoError(t, err)
			require.False(t, ok)
			dctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			err = a.Acquire(dctx, 2)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.Equal(t, int64(9), recordPermits(t, rdb, slow.Keys().Permits))
		})
	}
}

// TestCompositeReplyGrants: grantedAny, which decides whether WithReplicaAck
// waits for replicas, reads the composite script's table replies.
func TestCompositeReplyGrants(t *testing.T) {
	ctx := context.Background()
	_, p, rdb, _ := setupParts(t, []ratelimiter.Config{{Rate: 3, Interval: time.Hour}, {Rate: 3, Interval: time.Hour}})
	var keys []string
	for _, l := range p {
		k := l.Keys()
		keys = append(keys, k.Config, k.Value, k.ClientValue, k.Permits, k.ClientPermits)
	}
	now := time.Now().UnixMilli()
	for _, tc := range []struct {
		ns   []any
		want bool
	}{{[]any{5}, false}, {[]any{2, 2}, true}, {[]any{2}, false}, {[]any{1}, true}, {[]any{4, 9}, false}} {
		args := append([]any{now, "\x10" + strings.Repeat("x", 16), "1", 1, 1}, tc.ns...) // weights 1, 1
		v, err := rdb.Eval(ctx, ratelimiter.AcquireAllSource, keys, args...).Result()
		require.NoError(t, err)
		require.Equal(t, tc.want, ratelimiter.GrantedAny(v), "%v: %v", tc.ns, v)
	}
}

// A composite sends each part's keys of the mode the Client takes it for
// (OVERALL until told otherwise), the other mode's given as the part's
// config key: a part of the other mode is answered with nothing written,
// the call is sent again with all five keys of every part, and the Client
// remembers the part's mode. A part whose mode another writer changes is
// learnt again.
func TestCompositeKeysFollowMode(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	var calls evalCounter
	rdb.AddHook(&calls)
	c := ratelimiter.NewClient(rdb, ratelimiter.WithLocalRefusals(false))
	admin := ratelimiter.NewClient(newRedis(t))
	name := uniqueName(t)
	a, b := name+":overall", name+":perclient"
	_, err := admin.Limiter(a).TrySetRate(ctx, ratelimiter.Config{Mode: ratelimiter.Overall, Rate: 10, Interval: time.Hour})
	require.NoError(t, err)
	_, err = admin.Limiter(b).TrySetRate(ctx, ratelimiter.Config{Mode: ratelimiter.PerClient, Rate: 10, Interval: time.Hour})
	require.NoError(t, err)
	// The Client's first call also checks its permissions (a script), and
	// the first run of a script on the server may be sent twice (EVALSHA,
	// then EVAL): make them on another composite before counting.
	_, err = admin.Limiter(name+":warm").TrySetRate(ctx, ratelimiter.Config{Rate: 1, Interval: time.Hour})
	require.NoError(t, err)
	_, err = c.All(name+":warm").TryAcquire(ctx, 1)
	require.NoError(t, err)
	all := c.All(a, b)
	taken := func() {
		t.Helper()
		ok, err := all.TryAcquire(ctx, 1)
		require.NoError(t, err)
		require.True(t, ok)
	}
	start := calls.n.Load()
	taken()
	require.EqualValues(t, 2, calls.n.Load()-start, "the first call: OVERALL keys for both parts, then five each")
	taken()
	require.EqualValues(t, 3, calls.n.Load()-start, "then one call each")
	kb := c.Limiter(b).Keys()
	v, err := rdb.Get(ctx, kb.ClientValue).Int64()
	require.NoError(t, err)
	require.EqualValues(t, 8, v)
	n, err := rdb.Exists(ctx, kb.Value, kb.Permits).Result()
	require.NoError(t, err)
	require.Zero(t, n, "nothing written under the PER_CLIENT part's OVERALL keys")

	require.NoError(t, admin.Limiter(b).SetRate(ctx, ratelimiter.Config{Mode: ratelimiter.Overall, Rate: 5, Interval: time.Hour}))
	start = calls.n.Load()
	taken()
	require.EqualValues(t, 2, calls.n.Load()-start, "after the change: PER_CLIENT keys for the part, then five each")
	taken()
	require.EqualValues(t, 3, calls.n.Load()-start, "then one call each")
	v, err = rdb.Get(ctx, kb.Value).Int64()
	require.NoError(t, err)
	require.EqualValues(t, 3, v)
	typ, err := rdb.HGet(ctx, kb.Config, "type").Result()
	require.NoError(t, err)
	require.Equal(t, "0", typ, "the config hash is intact")
	v, err = rdb.Get(ctx, c.Limiter(a).Keys().Value).Int64()
	require.NoError(t, err)
	require.EqualValues(t, 6, v)
}
