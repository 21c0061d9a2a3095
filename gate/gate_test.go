package gate_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/gate"
	"github.com/goredisson/ratelimiter/internal/redistest"
)

var redisAddr string

func TestMain(m *testing.M) { os.Exit(redistest.Main(m, &redisAddr, nil)) }

func limiter(t *testing.T) *ratelimiter.Limiter {
	return ratelimiter.NewClient(redistest.Client(t, redisAddr)).Limiter(redistest.Name(t))
}

func TestName(t *testing.T) {
	assert.Equal(t, "p:ip:1.2.3.4", gate.Name("p:", "ip:1.2.3.4"))
	for _, key := range []string{"a{b}", "tab\t", strings.Repeat("x", gate.MaxKeyLen+1), "é"} {
		name := gate.Name("p:", key)
		assert.True(t, strings.HasPrefix(name, "p:sha256:"), name)
		assert.Len(t, name, len("p:sha256:")+64)
	}
	assert.True(t, gate.SafeName(strings.Repeat("x", gate.MaxKeyLen), gate.MaxKeyLen))
}

// Decide configures on first use and reports the reply's fields: a grant
// and a refusal are exact; a refusal whose hint passes the wait does not
// wait; the rate below the permits is a refusal with a Note.
func TestDecide(t *testing.T) {
	ctx := context.Background()
	rl := limiter(t)
	g := gate.New(ratelimiter.Config{Rate: 2, Interval: time.Minute}, 1)
	o, err := g.Decide(ctx, rl, time.Second, false)
	require.NoError(t, err)
	assert.True(t, o.Exact)
	assert.Equal(t, ratelimiter.Result{Granted: true, Limit: 2, Interval: time.Minute, Remaining: 1, ResetAfter: o.Result.ResetAfter}, o.Result)
	assert.Positive(t, o.Result.ResetAfter)
	_, err = g.Decide(ctx, rl, time.Second, false)
	require.NoError(t, err)
	o, err = g.Decide(ctx, rl, time.Second, false)
	require.NoError(t, err)
	assert.True(t, o.Exact)
	assert.False(t, o.Result.Granted)
	assert.Greater(t, o.Result.RetryAfter, 55*time.Second)

	require.NoError(t, rl.SetRate(ctx, ratelimiter.Config{Rate: 1, Interval: time.Minute}))
	o, err = gate.New(ratelimiter.Config{Rate: 2, Interval: time.Minute}, 2).Decide(ctx, rl, 0, false)
	require.NoError(t, err)
	assert.False(t, o.Result.Granted)
	assert.Equal(t, time.Minute, o.Result.RetryAfter)
	assert.ErrorIs(t, o.Note, ratelimiter.ErrPermitsExceedRate)
}

// A grant that came after waiting knows only the limit: Exact is false.
// In shadow mode the same state is refused without waiting.
func TestDecideWaits(t *testing.T) {
	ctx := context.Background()
	rl := limiter(t)
	g := gate.New(ratelimiter.Config{Rate: 1, Interval: 200 * time.Millisecond}, 1)
	_, err := g.Decide(ctx, rl, 0, false)
	require.NoError(t, err)
	o, err := g.Decide(ctx, rl, 0, true)
	require.NoError(t, err)
	assert.False(t, o.Result.Granted, "shadow: no wait")
	o, err = g.Decide(ctx, rl, 10*time.Second, false)
	require.NoError(t, err)
	assert.True(t, o.Result.Granted)
	assert.False(t, o.Exact)
	assert.Equal(t, int64(1), o.Result.Limit)
	assert.Positive(t, o.Waited)
}

// A limiter deleted after the Gate configured it is configured again.
func TestDecideReconfigures(t *testing.T) {
	ctx := context.Background()
	rl := limiter(t)
	g := gate.New(ratelimiter.Config{Rate: 3, Interval: time.Minute}, 1)
	_, err := g.Decide(ctx, rl, 0, false)
	require.NoError(t, err)
	_, err = rl.Delete(ctx)
	require.NoError(t, err)
	o, err := g.Decide(ctx, rl, 0, false)
	require.NoError(t, err)
	assert.Equal(t, int64(2), o.Result.Remaining)
}

// Wait: granted at once; false when the hint passes maxWait or ctx's
// deadline, with ctx still alive; without a Config an unconfigured
// limiter is ErrNotInitialized.
func TestWait(t *testing.T) {
	ctx := context.Background()
	rl := limiter(t)
	g := gate.New(ratelimiter.Config{Rate: 1, Interval: time.Minute}, 1)
	ok, err := g.Wait(ctx, rl, 0)
	require.NoError(t, err)
	assert.True(t, ok)
	ok, err = g.Wait(ctx, rl, 50*time.Millisecond)
	require.NoError(t, err)
	assert.False(t, ok)
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ok, err = g.Wait(short, rl, 0)
	require.NoError(t, err)
	assert.False(t, ok)
	assert.NoError(t, short.Err())

	_, err = gate.New(ratelimiter.Config{}, 1).Wait(ctx, limiter(t), 0)
	assert.ErrorIs(t, err, ratelimiter.ErrNotInitialized)
}
