package compat

import (
	"testing"
	"time"
)

// TestRetryTick reads each version's timer tick from a real JVM. Redisson
// 3.25.1 and later schedule a refused acquire's retry on that timer, so
// the retry comes at the first tick after the hint; earlier versions
// retry on Netty's event loop at the hint (read from the jars' sources:
// RedissonRateLimiter's newTimeout against getGroup().schedule). The tick
// is set when the client starts: from the retry interval (1.5 s by
// default: a 100 ms tick) up to 3.48, and from 3.49 on from one draw of
// the retry delay (EqualJitterDelay(1 s, 2 s): 500-1000 ms), so a 4.x JVM
// retries on a tick of 10-49 ms, drawn at start, or 100 ms when the draw
// is a whole 100 ms. docs/fairness.md, "Redisson's retry", says what the
// fair wakes make of it.
func TestRetryTick(t *testing.T) {
	for _, v := range Versions {
		t.Run(v, func(t *testing.T) {
			ctx := ctxT(t, time.Minute)
			ms, err := peerFor(t, v).Int(ctx, "timerTick")
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("Redisson %s: timer tick %d ms", v, ms)
			if versionAtLeast(v, "3.49.0") {
				if ms != 100 && (ms < 10 || ms > 49) {
					t.Errorf("tick %d ms, want 10-49 or 100 (a draw of 500-1000 ms)", ms)
				}
			} else if ms != 100 {
				t.Errorf("tick %d ms, want 100 (the 1.5 s retry interval)", ms)
			}
		})
	}
}
