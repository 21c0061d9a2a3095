package grpclimit_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/grpclimit"
	"github.com/goredisson/ratelimiter/internal/redistest"
	"github.com/goredisson/ratelimiter/wire"
)

var (
	minuteRule = grpclimit.Rule{Name: "minute", Config: ratelimiter.Config{Rate: 5, Interval: time.Minute}}
	hourRule   = grpclimit.Rule{Name: "hour", Config: ratelimiter.Config{Rate: 3, Interval: time.Hour}}
)

// keyed is a context whose calls carry the metadata x-key: key.
func keyed(key string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "x-key", key)
}

// quota returns the QuotaFailure violation of a refused call's status.
func quota(t testing.TB, err error) *errdetails.QuotaFailure_Violation {
	t.Helper()
	for _, d := range status.Convert(err).Details() {
		if q, ok := d.(*errdetails.QuotaFailure); ok && len(q.Violations) == 1 {
			return q.Violations[0]
		}
	}
	t.Fatalf("no QuotaFailure in %v", err)
	return nil
}

func left(t testing.TB, l *grpclimit.Interceptor, name string) int64 {
	t.Helper()
	n, err := l.Client().Limiter(name).AvailablePermits(context.Background())
	require.NoError(t, err)
	return n
}

// collect is a decision hook that keeps every Decision.
type collect struct {
	mu sync.Mutex
	ds []grpclimit.Decision
}

func (c *collect) hook(_ context.Context, d grpclimit.Decision) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ds = append(c.ds, d)
}

func (c *collect) all() []grpclimit.Decision {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]grpclimit.Decision(nil), c.ds...)
}

// Every rule's limiter is configured on first use with its own Config
// (an existing one keeps its own); each call, unary or stream, takes
// from all rules or none; the refusal's details and the Decision name the
// rule that binds, whichever it is.
func TestRulesAllOrNothing(t *testing.T) {
	p := prefix(t)
	seen := &collect{}
	l, err := grpclimit.New(newRedis(t), ratelimiter.Config{}, grpclimit.WithPrefix(p),
		grpclimit.WithKey(grpclimit.KeyByMetadata("x-key")), grpclimit.WithRules(minuteRule, hourRule),
		grpclimit.WithDecisionHook(seen.hook))
	require.NoError(t, err)
	h := &health{}
	c := startServer(t, h, interceptors(l)...)

	// Key a: the hourly rule (3) binds before the per-minute one (5).
	a := l.Names("x-key:a")
	require.Equal(t, []string{p + "{x-key:a}:minute", p + "{x-key:a}:hour"}, a)
	for i := 0; i < 2; i++ {
		_, err := c.Check(keyed("a"), &healthpb.HealthCheckRequest{})
		require.NoError(t, err, "call %d", i)
	}
	s, err := c.Watch(keyed("a"), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	_, err = s.Recv()
	require.NoError(t, err, "a stream takes its permit once")
	_, err = s.Recv()
	require.ErrorIs(t, err, io.EOF)
	_, err = c.Check(keyed("a"), &healthpb.HealthCheckRequest{})
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
	hint, ok := grpclimit.RetryAfter(err)
	require.True(t, ok)
	assert.Greater(t, hint, 59*time.Minute, "the hourly rule's wait")
	v := quota(t, err)
	assert.Equal(t, a[1], v.Subject)
	assert.Equal(t, "rate limit of 3 per 1h0m0s exceeded", v.Description)
	assert.Equal(t, int64(2), left(t, l, a[0]), "the refusal took nothing from the per-minute rule")
	for i, rule := range []grpclimit.Rule{minuteRule, hourRule} {
		cfg, err := l.Client().Limiter(a[i]).Config(context.Background())
		require.NoError(t, err)
		assert.Equal(t, rule.Config, cfg, "configured on first use: %s", a[i])
	}

	// Key b: its per-minute limiter exists with a rate of 1 (an operator's
	// or a Java service's): that configuration wins, and it binds.
	b := l.Names("x-key:b")
	_, err = l.Client().Limiter(b[0]).TrySetRate(context.Background(), ratelimiter.Config{Rate: 1, Interval: time.Minute})
	require.NoError(t, err)
	_, err = c.Check(keyed("b"), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	_, err = c.Check(keyed("b"), &healthpb.HealthCheckRequest{})
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
	hint, _ = grpclimit.RetryAfter(err)
	assert.True(t, hint > 55*time.Second && hint <= time.Minute+3*time.Millisecond, "hint %v: the per-minute rule's", hint)
	assert.Equal(t, b[0], quota(t, err).Subject)
	assert.Equal(t, int64(2), left(t, l, b[1]), "the refusal took nothing from the hourly rule")
	assert.Equal(t, 4, h.count())

	ds := seen.all()
	require.Len(t, ds, 6)
	assert.Equal(t, []string{"hour", "hour", "hour", "hour", "minute", "minute"},
		[]string{ds[0].Rule, ds[1].Rule, ds[2].Rule, ds[3].Rule, ds[4].Rule, ds[5].Rule})
	assert.Equal(t, grpclimit.Decision{FullMethod: "/grpc.health.v1.Health/Check", Key: "x-key:a", Name: a[1], Rule: "hour",
		RetryAfter: ds[3].RetryAfter, Waited: ds[3].Waited}, ds[3])
	assert.Equal(t, b[0], ds[5].Name)
}

// Many calls of one key at once, its hourly budget partly taken by a
// single-limiter caller: exactly the hourly permits left are granted, and
// the per-minute rule lost nothing to the refused calls.
func TestRulesConcurrent(t *testing.T) {
	l, err := grpclimit.New(newRedis(t), ratelimiter.Config{}, grpclimit.WithPrefix(prefix(t)),
		grpclimit.WithKey(grpclimit.KeyByMetadata("x-key")),
		grpclimit.WithRules(
			grpclimit.Rule{Name: "minute", Config: ratelimiter.Config{Rate: 20, Interval: time.Minute}},
			grpclimit.Rule{Name: "hour", Config: ratelimiter.Config{Rate: 12, Interval: time.Hour}}))
	require.NoError(t, err)
	names := l.Names("x-key:k")
	hour := l.Client().Limiter(names[1])
	_, err = hour.TrySetRate(context.Background(), ratelimiter.Config{Rate: 12, Interval: time.Hour})
	require.NoError(t, err)
	require.NoError(t, hour.Acquire(context.Background(), 7))
	h := &health{}
	c := startServer(t, h, interceptors(l)...)
	var wg sync.WaitGroup
	got := make([]codes.Code, 40)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.Check(keyed("k"), &healthpb.HealthCheckRequest{})
			got[i] = status.Code(err)
		}()
	}
	wg.Wait()
	count := map[codes.Code]int{}
	for _, c := range got {
		count[c]++
	}
	assert.Equal(t, map[codes.Code]int{codes.OK: 5, codes.ResourceExhausted: 35}, count)
	assert.Equal(t, 5, h.count())
	assert.Equal(t, int64(15), left(t, l, names[0]), "20 - the 5 granted")
	assert.Equal(t, int64(0), left(t, l, names[1]))
}

// New refuses bad rules before anything reaches Redis.
func TestNewRejectsBadRules(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never contacted
	defer rdb.Close()
	tooMany := make([]grpclimit.Rule, ratelimiter.MaxParts+1)
	for i := range tooMany {
		tooMany[i] = grpclimit.Rule{Name: fmt.Sprint("r", i), Config: minuteRule.Config}
	}
	for name, c := range map[string]struct {
		cfg  ratelimiter.Config
		opts []grpclimit.Option
	}{
		"none":           {ratelimiter.Config{}, []grpclimit.Option{grpclimit.WithRules()}},
		"too many":       {ratelimiter.Config{}, []grpclimit.Option{grpclimit.WithRules(tooMany...)}},
		"twice":          {ratelimiter.Config{}, []grpclimit.Option{grpclimit.WithRules(minuteRule, grpclimit.Rule{Name: "minute", Config: hourRule.Config})}},
		"bad name":       {ratelimiter.Config{}, []grpclimit.Option{grpclimit.WithRules(grpclimit.Rule{Name: "{x}", Config: hourRule.Config})}},
		"invalid config": {ratelimiter.Config{}, []grpclimit.Option{grpclimit.WithRules(minuteRule, grpclimit.Rule{Name: "x", Config: ratelimiter.Config{Rate: 1}})}},
		"permits > rate": {ratelimiter.Config{}, []grpclimit.Option{grpclimit.WithRules(minuteRule, hourRule), grpclimit.WithPermits(4)}},
		"New's config":   {minuteRule.Config, []grpclimit.Option{grpclimit.WithRules(hourRule)}},
		"rules twice":    {ratelimiter.Config{}, []grpclimit.Option{grpclimit.WithRules(hourRule), grpclimit.WithRules(minuteRule)}},
	} {
		l, err := grpclimit.New(rdb, c.cfg, c.opts...)
		assert.Nil(t, l, name)
		assert.ErrorIs(t, err, grpclimit.ErrInvalidOption, name)
		assert.ErrorIs(t, err, ratelimiter.ErrInvalidArgument, name)
	}
}

// With rules, WithWait waits for every rule at once, shadow mode serves
// what the rules refuse, and Redis failures fail open or closed.
func TestRulesWaitShadowFailure(t *testing.T) {
	fast := grpclimit.Rule{Name: "fast", Config: ratelimiter.Config{Rate: 1, Interval: 200 * time.Millisecond}}
	t.Run("wait", func(t *testing.T) {
		seen := &collect{}
		l, err := grpclimit.New(newRedis(t), ratelimiter.Config{}, grpclimit.WithPrefix(prefix(t)),
			grpclimit.WithRules(hourRule, fast), grpclimit.WithWait(10*time.Second), grpclimit.WithDecisionHook(seen.hook))
		require.NoError(t, err)
		c := startServer(t, &health{}, interceptors(l)...)
		for i := 0; i < 2; i++ {
			_, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{})
			require.NoError(t, err)
		}
		d := seen.all()[1]
		assert.True(t, d.Granted)
		assert.Equal(t, "fast", d.Rule, "the rule it waited for")
		assert.Positive(t, d.Waited)
		assert.Equal(t, int64(1), left(t, l, l.Names(d.Key)[0]), "3 - the 2 granted")
	})
	t.Run("shadow", func(t *testing.T) {
		seen := &collect{}
		l, err := grpclimit.New(newRedis(t), ratelimiter.Config{}, grpclimit.WithPrefix(prefix(t)),
			grpclimit.WithRules(fast, hourRule), grpclimit.WithShadow(), grpclimit.WithDecisionHook(seen.hook))
		require.NoError(t, err)
		h := &health{}
		c := startServer(t, h, interceptors(l)...)
		for i := 0; i < 3; i++ {
			_, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{})
			require.NoError(t, err)
		}
		assert.Equal(t, 3, h.count())
		d := seen.all()[1]
		assert.False(t, d.Granted)
		assert.True(t, d.Shadow)
		assert.Equal(t, "fast", d.Rule)
		assert.Equal(t, int64(2), left(t, l, l.Names(d.Key)[1]), "refusals took nothing from the hourly rule")
	})
	for _, mode := range []grpclimit.FailureMode{grpclimit.FailOpen, grpclimit.FailClosed} {
		t.Run(fmt.Sprintf("redis down/mode%d", mode), func(t *testing.T) {
			rdb := redis.NewClient(&redis.Options{Addr: deadAddr(t), MaxRetries: -1,
				DialTimeout: time.Second, DialerRetries: 1, DialerRetryTimeout: time.Millisecond})
			defer rdb.Close()
			var hooked atomic.Int64
			l, err := grpclimit.New(rdb, ratelimiter.Config{}, grpclimit.WithRules(fast, hourRule), grpclimit.WithFailureMode(mode),
				grpclimit.WithErrorHook(func(context.Context, string, error) { hooked.Add(1) }))
			require.NoError(t, err)
			c := startServer(t, &health{}, interceptors(l)...)
			_, err = c.Check(context.Background(), &healthpb.HealthCheckRequest{})
			want := map[grpclimit.FailureMode]codes.Code{grpclimit.FailOpen: codes.OK, grpclimit.FailClosed: codes.Unavailable}[mode]
			assert.Equal(t, want, status.Code(err), "%v", err)
			assert.Equal(t, int64(1), hooked.Load())
		})
	}
}

// On a real 6-node Redis Cluster, the rules of every key (plain keys,
// and keys with braces that are hashed) share one slot, so each call is
// one script call with no error; the keys land on every master; and a
// refusal by one rule takes nothing from the other.
func TestRulesCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := redistest.StartCluster(ctx, t)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})
	t.Cleanup(func() { _ = rdb.Close() })
	var hooked atomic.Int64
	l, err := grpclimit.New(rdb, ratelimiter.Config{}, grpclimit.WithPrefix("cl:"),
		grpclimit.WithKey(grpclimit.KeyByMetadata("x-key")), grpclimit.WithRules(minuteRule, hourRule),
		grpclimit.WithErrorHook(func(context.Context, string, error) { hooked.Add(1) }))
	require.NoError(t, err)
	c := startServer(t, &health{}, interceptors(l)...)

	keys := []string{"a{b}", "{x}", "}{", "a{}", strings.Repeat("k", 300)}
	for i := 0; i < 12; i++ {
		keys = append(keys, fmt.Sprintf("user-%d", i))
	}
	masters := map[string]bool{}
	for _, key := range keys {
		names := l.Names("x-key:" + key)
		var slots []int
		for _, name := range names {
			k := wire.KeysFor(name, l.Client().ID())
			for _, redisKey := range []string{k.Config, k.Value, k.ClientValue, k.Permits, k.ClientPermits} {
				slot, err := cl.KeySlot(ctx, redisKey)
				require.NoError(t, err)
				slots = append(slots, slot)
			}
		}
		for _, s := range slots {
			require.Equal(t, slots[0], s, "key %q: every key of every rule in one slot", key)
		}
		m, err := cl.MasterForSlot(ctx, slots[0])
		require.NoError(t, err)
		masters[m.Addr] = true

		for i := 0; i < 3; i++ {
			_, err := c.Check(keyed(key), &healthpb.HealthCheckRequest{})
			require.NoError(t, err, "key %q call %d", key, i)
		}
		_, err = c.Check(keyed(key), &healthpb.HealthCheckRequest{})
		require.Equal(t, codes.ResourceExhausted, status.Code(err), "key %q: %v", key, err)
		assert.Equal(t, names[1], quota(t, err).Subject)
		assert.Equal(t, int64(2), left(t, l, names[0]), "key %q: the refusal took nothing from the per-minute rule", key)
	}
	assert.Len(t, masters, 3, "the keys land on all three masters")
	assert.Zero(t, hooked.Load())
}

// An Outgoing with a Composite takes every call's permit from every part
// at once, configuring each part with its Config on first use; a call the
// hourly part refuses fails with ErrLimited, unsent, and takes nothing
// from the per-minute part. Fields that do not fit together fail with
// ErrInvalidOption and InvalidArgument, unsent.
func TestOutgoingComposite(t *testing.T) {
	h := &health{}
	addr := listen(t, h)
	c := ratelimiter.NewClient(newRedis(t))
	p := prefix(t)
	api := c.All(p+"{api}:minute", p+"{api}:hour")
	out := &grpclimit.Outgoing{Composite: api, MaxWait: 50 * time.Millisecond,
		Configs: []ratelimiter.Config{minuteRule.Config, hourRule.Config}}
	hc := healthpb.NewHealthClient(dial(t, addr, grpc.WithUnaryInterceptor(out.Unary())))
	for i := 0; i < 3; i++ {
		_, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{})
		require.NoError(t, err, "call %d", i)
	}
	_, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{})
	require.ErrorIs(t, err, grpclimit.ErrLimited)
	assert.Equal(t, codes.ResourceExhausted, status.Code(err))
	parts := api.Parts()
	for i, want := range []ratelimiter.Config{minuteRule.Config, hourRule.Config} {
		cfg, err := parts[i].Config(context.Background())
		require.NoError(t, err)
		assert.Equal(t, want, cfg)
	}
	n, err := parts[0].AvailablePermits(context.Background())
	require.NoError(t, err)
	assert.Equal(t, int64(2), n, "the refused call took nothing from the per-minute part")

	lim := c.Limiter(p + "single")
	for name, o := range map[string]*grpclimit.Outgoing{
		"neither":            {},
		"both":               {Limiter: lim, Composite: api},
		"Config, Composite":  {Composite: api, Config: minuteRule.Config},
		"Configs, Limiter":   {Limiter: lim, Configs: []ratelimiter.Config{minuteRule.Config}},
		"Configs too few":    {Composite: api, Configs: []ratelimiter.Config{minuteRule.Config}},
		"Configs[1] invalid": {Composite: api, Configs: []ratelimiter.Config{minuteRule.Config, {Rate: 1}}},
	} {
		_, err := healthpb.NewHealthClient(dial(t, addr, grpc.WithUnaryInterceptor(o.Unary()))).Check(context.Background(), &healthpb.HealthCheckRequest{})
		assert.ErrorIs(t, err, grpclimit.ErrInvalidOption, name)
		assert.Equal(t, codes.InvalidArgument, status.Code(err), name)
	}
	assert.Equal(t, 3, h.count())
}
