package main_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter/internal/compat"
	"github.com/goredisson/ratelimiter/internal/redistest"
)

// javaPeer starts a real Redisson peer (internal/compat) on the test's
// Redis; without Java and Maven it skips, or fails under CI=true, and
// without a redis-server it skips (redistest.Need).
func javaPeer(t *testing.T, version string) *compat.Peer {
	t.Helper()
	redistest.SkipIfShort(t, "the Java peer")
	redistest.Need(t)
	if tool := compat.ToolsMissing(); tool != "" {
		if redistest.Required() {
			t.Fatalf("%s required (CI=true)", tool)
		}
		t.Skipf("no %s: the Java peer cannot run", tool)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	require.NoError(t, compat.Build(ctx, version))
	p, err := compat.StartPeer(ctx, compat.PeerOptions{Version: version, Addr: redisAddr})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// The operator's commands on limiters that real Java Redisson wrote:
// explain names Redisson as the writer of the records that block an ask;
// sweep finds the one Java stopped using and gives its keys a TTL, which
// Redisson then reads, and leaves the one Java still uses alone.
func TestCommandsOnJavaLimiters(t *testing.T) {
	for _, v := range []string{"4.7.0", "3.16.3"} {
		t.Run(v, func(t *testing.T) {
			peer := javaPeer(t, v)
			ctx := context.Background()
			base := uniqueName(t)
			idle, busy := base+"-idle", base+"-busy"
			do := func(args ...any) string {
				t.Helper()
				out, err := peer.Do(ctx, args...)
				require.NoError(t, err, "%v", args)
				return out
			}
			do("trySetRate", idle, "OVERALL", 5, 3_600_000)
			do("trySetRate", busy, "OVERALL", 5, 3_600_000)
			do("tryAcquire", idle, 3)

			r := failsWith(t, 1, cli(t, "explain", idle, "-n", "4"))
			assert.Contains(t, r.stdout, "refused now")
			assert.Contains(t, r.stdout, "redisson", "the writer of Java's record")

			// idle's record ages past --idle 1s while busy takes one now.
			time.Sleep(1500 * time.Millisecond)
			do("tryAcquire", busy, 1)
			r = ok(t, cli(t, "sweep", "--match", base+"-*", "--idle", "1s", "--apply", "--ttl", "1h"))
			assert.Contains(t, r.stdout, idle)
			assert.NotContains(t, r.stdout, busy)
			ttl, err := strconv.ParseInt(do("remainTimeToLive", idle), 10, 64)
			require.NoError(t, err)
			assert.Greater(t, ttl, int64(3_500_000), "Redisson's remainTimeToLive after sweep --ttl 1h")
			assert.Equal(t, "-1", do("remainTimeToLive", busy), "the limiter in use keeps no TTL")
			assert.Equal(t, "2", do("availablePermits", idle), "Redisson still reads the swept limiter")
		})
	}
}
