package ratelimiter_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/internal/redistest"
)

// TestClockSkewEffect measures what clocks that disagree do to the limit
// (docs/differences.md, "Clocks"): two Clients, one d/2 ahead of real time and one d/2
// behind, 4 goroutines each taking permits of one 50/s limiter for 4 s;
// the most grants in any real one-second window:
//
//	go test -run TestClockSkewEffect -v .
//
// It asserts only the row without skew (within the stamp slack of
// TestCombiningLimitHoldsAcrossClients); the others are measurements.
func TestClockSkewEffect(t *testing.T) {
	redistest.SkipIfShort(t, "the clock skew measurement")
	const rate, interval = 50, time.Second
	var report []string
	for _, skew := range []time.Duration{0, 100 * time.Millisecond, 500 * time.Millisecond} {
		ctx := context.Background()
		name := uniqueName(t)
		var ls []*ratelimiter.Limiter
		for _, off := range []time.Duration{skew / 2, -skew / 2} {
			c := ratelimiter.NewClient(newRedis(t), ratelimiter.WithClock(func() time.Time { return time.Now().Add(off) }))
			ls = append(ls, c.Limiter(name))
		}
		_, err := ls[0].TrySetRate(ctx, ratelimiter.Config{Rate: rate, Interval: interval})
		require.NoError(t, err)
		times, errs := grantTimes(8, time.Now().Add(4*time.Second), func(g int) (bool, error) { return ls[g%2].TryAcquire(ctx, 1) })
		require.Zero(t, errs)
		worst, _ := redistest.WorstWindow(times, interval.Milliseconds())
		slack, _ := redistest.WorstWindow(times, (interval - edgeSlack).Milliseconds())
		report = append(report, fmt.Sprintf("| ±%v | %d | %.2fx |", skew/2, worst, float64(worst)/rate))
		if skew == 0 {
			require.LessOrEqual(t, slack, rate, "no skew: every %v window", interval-edgeSlack)
		}
	}
	t.Logf("CLOCK SKEW, two clients on one %d/%v limiter, 4 s:\n| clocks | most grants in one real second | vs rate |\n|---|---|---|\n%s",
		rate, interval, strings.Join(report, "\n"))
}
