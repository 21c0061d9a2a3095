package compat

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	ratelimiter "github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/wire"
)

// side is one client of a limiter: the Java peer (real Redisson) or the Go
// library. Scenarios are written once against it and run in both directions.
type side interface {
	String() string
	id() string
	trySetRate(ctx context.Context, name string, c ratelimiter.Config) (bool, error)
	setRate(ctx context.Context, name string, c ratelimiter.Config, keepState bool) error
	updateRate(ctx context.Context, name string, c ratelimiter.Config, keepState bool) (bool, error)
	getConfig(ctx context.Context, name string) (ratelimiter.Config, error) // Mode, Rate, Interval
	tryAcquire(ctx context.Context, name string, n int64) (bool, error)
	tryAcquireTimeout(ctx context.Context, name string, n int64, timeout time.Duration) (bool, error)
	acquire(ctx context.Context, name string, n int64) error
	release(ctx context.Context, name string, n int64) error
	available(ctx context.Context, name string) (int64, error)
	expire(ctx context.Context, name string, ttl time.Duration, cond ratelimiter.ExpireCondition) (bool, error)
	expireAt(ctx context.Context, name string, at time.Time, cond ratelimiter.ExpireCondition) (bool, error)
	clearExpire(ctx context.Context, name string) (bool, error)
	remainTTL(ctx context.Context, name string) (time.Duration, error)
	del(ctx context.Context, name string) (bool, error)
	exists(ctx context.Context, name string) (bool, error)
}

// javaSide drives the Redisson peer.
type javaSide struct{ p *Peer }

func (j javaSide) String() string { return "java-" + j.p.Version() }
func (j javaSide) id() string     { return j.p.ID() }

func modeName(m ratelimiter.Mode) string {
	if m == ratelimiter.PerClient {
		return "PER_CLIENT"
	}
	return "OVERALL"
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

func (j javaSide) rateArgs(op, name string, c ratelimiter.Config) []any {
	a := []any{op, name, modeName(c.Mode), c.Rate, ms(c.Interval)}
	if c.KeepAlive > 0 {
		a = append(a, ms(c.KeepAlive))
	}
	return a
}

func (j javaSide) trySetRate(ctx context.Context, name string, c ratelimiter.Config) (bool, error) {
	return j.p.Bool(ctx, j.rateArgs("trySetRate", name, c)...)
}

func (j javaSide) setRate(ctx context.Context, name string, c ratelimiter.Config, keepState bool) error {
	if keepState {
		_, err := j.p.Do(ctx, "setRateArgs", name, modeName(c.Mode), c.Rate, ms(c.Interval), ms(c.KeepAlive), true)
		return err
	}
	_, err := j.p.Do(ctx, j.rateArgs("setRate", name, c)...)
	return err
}

func (j javaSide) updateRate(ctx context.Context, name string, c ratelimiter.Config, keepState bool) (bool, error) {
	return j.p.Bool(ctx, "updateRate", name, modeName(c.Mode), c.Rate, ms(c.Interval), ms(c.KeepAlive), keepState)
}

func (j javaSide) getConfig(ctx context.Context, name string) (ratelimiter.Config, error) {
	s, err := j.p.Do(ctx, "getConfig", name)
	if err != nil {
		return ratelimiter.Config{}, err
	}
	f := strings.Fields(s)
	if len(f) != 3 {
		return ratelimiter.Config{}, fmt.Errorf("getConfig answer %q", s)
	}
	var c ratelimiter.Config
	if f[0] == "PER_CLIENT" {
		c.Mode = ratelimiter.PerClient
	}
	c.Rate, _ = strconv.ParseInt(f[1], 10, 64)
	iv, _ := strconv.ParseInt(f[2], 10, 64)
	c.Interval = time.Duration(iv) * time.Millisecond
	return c, nil
}

func (j javaSide) tryAcquire(ctx context.Context, name string, n int64) (bool, error) {
	return j.p.Bool(ctx, "tryAcquire", name, n)
}

func (j javaSide) tryAcquireTimeout(ctx context.Context, name string, n int64, timeout time.Duration) (bool, error) {
	return j.p.Bool(ctx, "tryAcquireTimeout", name, n, ms(timeout))
}

func (j javaSide) acquire(ctx context.Context, name string, n int64) error {
	_, err := j.p.Do(ctx, "acquire", name, n)
	return err
}

func (j javaSide) release(ctx context.Context, name string, n int64) error {
	_, err := j.p.Do(ctx, "release", name, n)
	return err
}

func (j javaSide) available(ctx context.Context, name string) (int64, error) {
	return j.p.Int(ctx, "availablePermits", name)
}

func (j javaSide) expire(ctx context.Context, name string, ttl time.Duration, cond ratelimiter.ExpireCondition) (bool, error) {
	if cond == "" {
		return j.p.Bool(ctx, "expire", name, ms(ttl))
	}
	return j.p.Bool(ctx, "expire", name, ms(ttl), string(cond))
}

func (j javaSide) expireAt(ctx context.Context, name string, at time.Time, cond ratelimiter.ExpireCondition) (bool, error) {
	if cond == "" {
		return j.p.Bool(ctx, "expireAt", name, at.UnixMilli())
	}
	return j.p.Bool(ctx, "expireAt", name, at.UnixMilli(), string(cond))
}

func (j javaSide) clearExpire(ctx context.Context, name string) (bool, error) {
	return j.p.Bool(ctx, "clearExpire", name)
}

func (j javaSide) remainTTL(ctx context.Context, name string) (time.Duration, error) {
	n, err := j.p.Int(ctx, "remainTimeToLive", name)
	if n < 0 {
		return time.Duration(n), err // -1 / -2 as the Go constants
	}
	return time.Duration(n) * time.Millisecond, err
}

func (j javaSide) del(ctx context.Context, name string) (bool, error) {
	return j.p.Bool(ctx, "delete", name)
}

func (j javaSide) exists(ctx context.Context, name string) (bool, error) {
	return j.p.Bool(ctx, "isExists", name)
}

// goSide drives the Go library.
type goSide struct {
	c   *ratelimiter.Client
	tag string
}

func (g goSide) String() string { return "go" + g.tag }
func (g goSide) id() string     { return g.c.ID() }

func (g goSide) rl(name string) *ratelimiter.Limiter { return g.c.Limiter(name) }

// keys returns the keys of name as g's Client names them (goKeys).
func (g goSide) keys(name string) wire.Keys { return goKeys(g.c, name) }

func (g goSide) trySetRate(ctx context.Context, name string, c ratelimiter.Config) (bool, error) {
	return g.rl(name).TrySetRate(ctx, c)
}

func (g goSide) setRate(ctx context.Context, name string, c ratelimiter.Config, keepState bool) error {
	if keepState {
		return g.rl(name).SetRate(ctx, c, ratelimiter.KeepState())
	}
	return g.rl(name).SetRate(ctx, c)
}

func (g goSide) updateRate(ctx context.Context, name string, c ratelimiter.Config, keepState bool) (bool, error) {
	if keepState {
		return g.rl(name).UpdateRate(ctx, c, ratelimiter.KeepState())
	}
	return g.rl(name).UpdateRate(ctx, c)
}

func (g goSide) getConfig(ctx context.Context, name string) (ratelimiter.Config, error) {
	c, err := g.rl(name).Config(ctx)
	c.KeepAlive = 0 // compared with Java's getConfig, which has no keep-alive
	return c, err
}

func (g goSide) tryAcquire(ctx context.Context, name string, n int64) (bool, error) {
	return g.rl(name).TryAcquire(ctx, n)
}

func (g goSide) tryAcquireTimeout(ctx context.Context, name string, n int64, timeout time.Duration) (bool, error) {
	return g.rl(name).TryAcquireTimeout(ctx, n, timeout)
}

func (g goSide) acquire(ctx context.Context, name string, n int64) error {
	return g.rl(name).Acquire(ctx, n)
}

func (g goSide) release(ctx context.Context, name string, n int64) error {
	return g.rl(name).Release(ctx, n)
}

func (g goSide) available(ctx context.Context, name string) (int64, error) {
	return g.rl(name).AvailablePermits(ctx)
}

func (g goSide) expire(ctx context.Context, name string, ttl time.Duration, cond ratelimiter.ExpireCondition) (bool, error) {
	return g.rl(name).ExpireIf(ctx, ttl, cond)
}

func (g goSide) expireAt(ctx context.Context, name string, at time.Time, cond ratelimiter.ExpireCondition) (bool, error) {
	return g.rl(name).ExpireAtIf(ctx, at, cond)
}

func (g goSide) clearExpire(ctx context.Context, name string) (bool, error) {
	return g.rl(name).ClearExpire(ctx)
}

func (g goSide) remainTTL(ctx context.Context, name string) (time.Duration, error) {
	return g.rl(name).RemainTimeToLive(ctx)
}

func (g goSide) del(ctx context.Context, name string) (bool, error) {
	return g.rl(name).Delete(ctx)
}

func (g goSide) exists(ctx context.Context, name string) (bool, error) {
	return g.rl(name).Exists(ctx)
}

// goKeys returns the keys of the limiter name as Client c, made without a
// name mapper, names them: Redisson's layout for name and c's id
// (wire.KeysFor). The Client does not show its keys; the tests that read
// Redis at these keys after Go grants fail when it wrote elsewhere, and
// TestSnapshotKeyLayout's replay checks that Go Clients, with Java's
// client ids and name mapper, write exactly the keys Redisson wrote.
func goKeys(c *ratelimiter.Client, name string) wire.Keys { return wire.KeysFor(name, c.ID()) }

// newGoClient makes a Go client on the package's Redis writing the member
// format that matches a Redisson version.
func newGoClient(t testing.TB, version string, opts ...ratelimiter.Option) *ratelimiter.Client {
	t.Helper()
	opts = append([]ratelimiter.Option{ratelimiter.WithMemberFormat(formatFor(version))}, opts...)
	return ratelimiter.NewClient(rdb(t), opts...)
}

// pair is one direction of a scenario: a acts, b checks (and acts back).
type pair struct{ a, b side }

// bothWays runs f for every covered version as java->go and go->java.
// versions limits the versions (nil: all).
func bothWays(t *testing.T, versions []string, f func(t *testing.T, v string, p pair)) {
	if versions == nil {
		versions = Versions
	}
	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			j := javaSide{peerFor(t, v)}
			g := goSide{c: newGoClient(t, v)}
			t.Run("java-acts-go-checks", func(t *testing.T) { f(t, v, pair{a: j, b: g}) })
			t.Run("go-acts-java-checks", func(t *testing.T) { f(t, v, pair{a: g, b: j}) })
		})
	}
}

// must fails the test on err.
func must[T any](t testing.TB, what string) func(v T, err error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return v
	}
}

func check(t testing.TB, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// unsupported reports whether err is the peer's answer for an operation its
// Redisson version lacks.
func unsupported(err error) bool { return errors.Is(err, ErrUnsupported) }

// javaOf returns the Java side of a pair.
func javaOf(p pair) javaSide {
	if j, ok := p.a.(javaSide); ok {
		return j
	}
	return p.b.(javaSide)
}
