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
// the most grants in any real one-second window, on the server's clock
// (the default) and on the Clients' own (WithServerClock(false)):
//
//	go test -run TestClockSkewEffect -v .
//
// It asserts the rows on the server's clock, whatever the offset, and
// the client's-clock row without skew, within edgeSlack (grant times are
// reply times); the other rows are measurements.
func TestClockSkewEffect(t *testing.T) {
	redistest.SkipIfShort(t, "the clock skew measurement")
	const rate, interval = 50, time.Second
	var report []string
	for _, server := range []bool{true, false} {
		for _, skew := range []time.Duration{0, 100 * time.Millisecond, 500 * time.Millisecond} {
			ctx := context.Background()
			name := uniqueName(t)
			var ls []*ratelimiter.Limiter
			for _, off := range []time.Duration{skew / 2, -skew / 2} {
				c := ratelimiter.NewClient(newRedis(t), ratelimiter.WithServerClock(server),
					ratelimiter.WithClock(func() time.Time { return time.Now().Add(off) }))
				ls = append(ls, c.Limiter(name))
			}
			_, err := ls[0].TrySetRate(ctx, ratelimiter.Config{Rate: rate, Interval: interval})
			require.NoError(t, err)
			times, errs := grantTimes(8, time.Now().Add(4*time.Second), func(g int) (bool, error) { return ls[g%2].TryAcquire(ctx, 1) })
			require.Zero(t, errs)
			worst, _ := redistest.WorstWindow(times, interval.Milliseconds())
			slack, _ := redistest.WorstWindow(times, (interval - edgeSlack).Milliseconds())
			clock := map[bool]string{true: "server's", false: "clients'"}[server]
			report = append(report, fmt.Sprintf("| %s | ±%v | %d | %.2fx |", clock, skew/2, worst, float64(worst)/rate))
			if server || skew == 0 {
				require.LessOrEqual(t, slack, rate, "%s clock, ±%v: every %v window", clock, skew/2, interval-edgeSlack)
			}
		}
	}
	t.Logf("CLOCK SKEW, two clients on one %d/%v limiter, 4 s:\n| stamps by | clocks | most grants in one real second | vs rate |\n|---|---|---|---|\n%s",
		rate, interval, strings.Join(report, "\n"))
}
