package ratelimiter

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The local window of an outage (localwindow.go) on an injected clock.

func TestLocalWindowGrantsTheLimitThenHints(t *testing.T) {
	start := time.Unix(1000, 0)
	w := newLocalWindow(5, 640*time.Millisecond, start) // slots of 10 ms
	now := start
	for i := 0; i < 5; i++ {
		got := w.take(1, now)
		require.True(t, got.granted, "take %d", i)
		require.Equal(t, int64(4-i), got.remaining)
		now = now.Add(25 * time.Millisecond) // slots 0, 2, 5, 7, 10
	}
	got := w.take(1, now) // at 125 ms
	require.False(t, got.granted)
	require.False(t, got.never)
	// The permit of slot 0 leaves when slot 65 begins: 650 ms.
	require.Equal(t, 650*time.Millisecond-125*time.Millisecond, got.hint)
	require.Equal(t, got.hint, got.reset)
	require.False(t, w.take(1, start.Add(649*time.Millisecond)).granted, "a ms before the hint")
	require.True(t, w.take(1, start.Add(650*time.Millisecond)).granted, "at the hint")

	// Two permits asked: free when the second oldest slot leaves.
	got = w.take(2, start.Add(651*time.Millisecond))
	require.False(t, got.granted)
	require.Equal(t, start.Add(700*time.Millisecond), start.Add(651*time.Millisecond+got.hint), "slot 5 leaves at 700 ms")

	// More than the limit never comes.
	got = w.take(6, start.Add(700*time.Millisecond))
	require.False(t, got.granted)
	require.True(t, got.never)

	// An idle interval and a slot later the window is empty.
	got = w.take(5, start.Add(2*time.Second))
	require.True(t, got.granted)
	require.Zero(t, got.remaining)
}

func TestLocalWindowHoldsTheLimitInEveryInterval(t *testing.T) {
	const limit = 7
	interval := 100 * time.Millisecond
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0))
		start := time.Unix(5000, 0)
		w := newLocalWindow(limit, interval, start)
		type grant struct {
			at time.Duration
			n  int64
		}
		var grants []grant
		at := time.Duration(0)
		for i := 0; i < 2000; i++ {
			at += time.Duration(rng.IntN(3000)) * time.Microsecond
			if rng.IntN(50) == 0 {
				at -= time.Millisecond // a clock that steps back a little
			}
			n := int64(1 + rng.IntN(3))
			if got := w.take(n, start.Add(at)); got.granted {
				grants = append(grants, grant{at, n})
			}
		}
		// Every window of one interval that ends at a grant.
		for i, g := range grants {
			var sum int64
			for _, h := range grants[:i+1] {
				if h.at > g.at-interval {
					sum += h.n
				}
			}
			require.LessOrEqual(t, sum, int64(limit), "seed %d: the interval before %v", seed, g.at)
		}
		require.Greater(t, len(grants), 2000/(3*2)/4, "seed %d: the window grants", seed)
	}
}

func TestLocalLimitRoundsDownToAPermit(t *testing.T) {
	require.Equal(t, int64(1), localLimit(0.1, 10))
	require.Equal(t, int64(1), localLimit(1.0/3, 3))
	require.Equal(t, int64(3), localLimit(1.0/3, 10))
	require.Equal(t, int64(25), localLimit(0.25, 100))
	require.Equal(t, int64(0), localLimit(0.25, 3))
	require.Equal(t, int64(100), localLimit(1, 100))
}

func TestOutageTakesLocallyOnlyInAnOutageAndAtAKnownRate(t *testing.T) {
	cfg, err := OutageFallback{Replicas: 4}.resolve()
	require.NoError(t, err)
	o := newOutage(cfg, nil, nil)
	now := time.Unix(100, 0)
	o.now = func() time.Time { return now }
	o.learn("lane", 20, time.Second)
	_, ok := o.take("lane", 1)
	require.False(t, ok, "no outage: Redis decides")

	o.isDown.Store(true) // as enter does, without its probe
	_, ok = o.take("other", 1)
	require.False(t, ok, "a rate never seen: Redis decides (and fails)")
	for i := 0; i < 5; i++ {
		d, ok := o.take("lane", 1)
		require.True(t, ok)
		require.True(t, d.res.Granted && d.res.Degraded, "take %d of 20/4", i)
		require.Equal(t, int64(5), d.res.Limit)
		require.Equal(t, time.Second, d.res.Interval)
	}
	d, _ := o.take("lane", 1)
	require.False(t, d.res.Granted)
	require.Equal(t, time.Second+time.Second/localSlots, d.res.RetryAfter, "slot 0 leaves at the interval and a slot")
	d, _ = o.take("lane", 21)
	require.ErrorIs(t, d.err, ErrPermitsExceedRate)
	d, _ = o.take("lane", 6)
	require.True(t, d.never)
	require.Equal(t, time.Second, d.res.RetryAfter, "above the local limit: the interval")

	// A new rate starts a new window; a forgotten limiter goes to Redis.
	o.learn("lane", 40, time.Second)
	d, _ = o.take("lane", 10)
	require.True(t, d.res.Granted)
	o.forget("lane")
	_, ok = o.take("lane", 1)
	require.False(t, ok)
}

func TestOutageFallbackRejectsInvalidShares(t *testing.T) {
	for _, o := range []OutageFallback{
		{}, {Share: 0.5, Replicas: 2}, {Share: -0.1}, {Share: 1.5}, {Replicas: -1}, {Replicas: 65537},
		{Share: 0.5, Probe: time.Millisecond}, {Share: 0.5, Probe: time.Minute}, {Share: 0.5, Limiters: -1},
	} {
		_, err := o.resolve()
		require.ErrorIs(t, err, ErrInvalidArgument, "%+v", o)
	}
	o, err := OutageFallback{Replicas: 4}.resolve()
	require.NoError(t, err)
	require.Equal(t, OutageFallback{Share: 0.25, Replicas: 4, Probe: 200 * time.Millisecond, Limiters: 10000}, o)
}

func TestOutageRemembersAtMostLimiters(t *testing.T) {
	o := newOutage(OutageFallback{Share: 1, Probe: time.Second, Limiters: 3}, nil, nil)
	for _, lane := range []string{"a", "b", "c", "d", "e"} {
		o.learn(lane, 10, time.Second)
	}
	require.Len(t, o.known, 3)
	require.NotNil(t, o.known["e"])
}

// TestOutageWindowHoldsAcrossOutages: ten 200 ms outages in one hour (a
// loaded machine's stalls, each taken for an outage while Redis is
// healthy) of a limiter of 100 per hour, Replicas 2, grant at most the
// local limit of 50 in all: the local window is kept from one outage to
// the next. It is dropped once its grants are an interval old, and when
// the rate changes.
func TestOutageWindowHoldsAcrossOutages(t *testing.T) {
	cfg, err := OutageFallback{Replicas: 2, Probe: 10 * time.Second}.resolve()
	require.NoError(t, err)
	o := newOutage(cfg, nil, nil) // the probe never fires: its PING would need a client
	now := time.Unix(1000, 0)
	o.now = func() time.Time { return now }
	o.learn("lane", 100, time.Hour)
	granted := 0
	for i := 0; i < 10; i++ {
		o.enter(errors.New("no answer by the deadline"))
		for {
			d, ok := o.take("lane", 1)
			require.True(t, ok)
			if !d.res.Granted {
				break
			}
			granted++
		}
		now = now.Add(200 * time.Millisecond)
		o.end()
		o.learn("lane", 100, time.Hour) // Redis answers again
		now = now.Add(5 * time.Minute)
	}
	require.Equal(t, 50, granted, "grants of ten outages in one hour")

	// An hour and a slot after the first grants, they have left the
	// window: the next outage grants them again.
	now = time.Unix(1000, 0).Add(time.Hour + time.Hour/localSlots + time.Second)
	o.learn("lane", 100, time.Hour)
	require.Nil(t, o.known["lane"].window, "an empty window is dropped")
	o.enter(errors.New("down"))
	d, _ := o.take("lane", 50)
	require.True(t, d.res.Granted)
	o.end()
	require.NotNil(t, o.known["lane"].window, "a window with grants outlives the outage")

	// A new rate starts a new window.
	o.learn("lane", 200, time.Hour)
	o.enter(errors.New("down"))
	d, _ = o.take("lane", 100)
	require.True(t, d.res.Granted, "a new rate: a new window")
	o.end()
}
