package gate_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/gate"
	"github.com/goredisson/ratelimiter/internal/redistest"
)

var (
	perSec  = ratelimiter.Config{Rate: 2, Interval: time.Second}
	perHour = ratelimiter.Config{Rate: 3, Interval: time.Hour}
)

// CheckRules refuses every kind of bad set, each with an error matching
// ErrInvalidArgument and naming what is wrong.
func TestCheckRules(t *testing.T) {
	ok := []gate.Rule{{Name: "sec", Config: perSec}, {Name: "hour", Config: perHour}}
	require.NoError(t, gate.CheckRules(ok, 2))
	tooMany := make([]gate.Rule, ratelimiter.MaxParts+1)
	for i := range tooMany {
		tooMany[i] = gate.Rule{Name: fmt.Sprint("r", i), Config: perSec}
	}
	for what, c := range map[string]struct {
		rules   []gate.Rule
		permits int64
		says    string
	}{
		"none":        {nil, 1, "0 rules"},
		"too many":    {tooMany, 1, "17 rules"},
		"twice":       {[]gate.Rule{{Name: "sec", Config: perSec}, {Name: "sec", Config: perHour}}, 1, `"sec" given twice`},
		"brace":       {[]gate.Rule{{Name: "a{b}", Config: perSec}}, 1, `rule name "a{b}"`},
		"empty name":  {[]gate.Rule{{Name: "", Config: perSec}}, 1, `rule name ""`},
		"long name":   {[]gate.Rule{{Name: strings.Repeat("x", gate.MaxRuleLen+1), Config: perSec}}, 1, "rule name"},
		"zero config": {[]gate.Rule{{Name: "sec", Config: ratelimiter.Config{}}}, 1, `rule "sec": config`},
		"permits":     {ok, 3, `rule "sec": permits per request 3 above its rate 2`},
	} {
		err := gate.CheckRules(c.rules, c.permits)
		require.ErrorIs(t, err, ratelimiter.ErrInvalidArgument, what)
		assert.Contains(t, err.Error(), c.says, what)
	}
}

// Names: one name per rule, all with one hash tag; a key that is not a
// safe name (braces, too long) is hashed inside the tag.
func TestRuleNames(t *testing.T) {
	g := gate.NewRules([]gate.Rule{{Name: "sec", Config: perSec}, {Name: "hour", Config: perHour}}, 1)
	assert.Equal(t, []string{"p:{ip:1.2.3.4}:sec", "p:{ip:1.2.3.4}:hour"}, g.Names("p:", "ip:1.2.3.4"))
	for _, key := range []string{"a{b}", "}{", "{x}", strings.Repeat("k", gate.MaxKeyLen+1)} {
		names := g.Names("p:", key)
		tag := "p:{sha256:"
		require.True(t, strings.HasPrefix(names[0], tag), names[0])
		assert.Equal(t, strings.TrimSuffix(names[0], ":sec")+":hour", names[1])
		assert.Equal(t, 2, strings.Count(names[0], "{")+strings.Count(names[0], "}"), "one tag: %s", names[0])
	}
	assert.NotEqual(t, g.Names("p:", "a{b}"), g.Names("p:", "a{c}"))
	assert.Equal(t, "hour", g.Rule(1))
	assert.Equal(t, "", g.Rule(2))
	assert.Equal(t, []string{"p:k"}, gate.New(perSec, 1).Names("p:", "k"))
	assert.Equal(t, "", gate.New(perSec, 1).Rule(0))
}

// A rules Gate configures every part with its own Config on first use,
// takes from all or none, and reports the binding part; a part deleted
// since is configured again.
func TestDecideRules(t *testing.T) {
	ctx := context.Background()
	c := ratelimiter.NewClient(redistest.Client(t, redisAddr))
	g := gate.NewRules([]gate.Rule{{Name: "sec", Config: perSec}, {Name: "hour", Config: perHour}}, 1)
	names := g.Names(redistest.Name(t)+":", "k")
	for i := 0; i < 2; i++ {
		o, err := g.Decide(ctx, g.Target(c, names), 0, false)
		require.NoError(t, err)
		require.True(t, o.Result.Granted)
		assert.Equal(t, 0, o.Result.Part, "the per-second rule has the fewest left")
	}
	for i, want := range []ratelimiter.Config{perSec, perHour} {
		got, err := c.Limiter(names[i]).Config(ctx)
		require.NoError(t, err)
		assert.Equal(t, want.Rate, got.Rate, names[i])
		assert.Equal(t, want.Interval, got.Interval, names[i])
	}
	o, err := g.Decide(ctx, g.Target(c, names), 0, false)
	require.NoError(t, err)
	require.False(t, o.Result.Granted)
	assert.Equal(t, 0, o.Result.Part)
	left, err := c.Limiter(names[1]).AvailablePermits(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(1), left, "the refusal took nothing from the hourly rule")

	_, err = c.Limiter(names[1]).Delete(ctx)
	require.NoError(t, err)
	o, err = g.Decide(ctx, g.Target(c, names), 0, false)
	require.NoError(t, err)
	assert.False(t, o.Result.Granted, "the per-second rule still refuses")
	left, err = c.Limiter(names[1]).AvailablePermits(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(3), left, "the deleted rule was configured again")
}

// A part whose rate was lowered below the permits refuses with its own
// interval as hint and names itself in Part and Note; a Target of the
// wrong size is an error.
func TestDecideRulesExceedRate(t *testing.T) {
	ctx := context.Background()
	c := ratelimiter.NewClient(redistest.Client(t, redisAddr))
	g := gate.NewRules([]gate.Rule{{Name: "sec", Config: perSec}, {Name: "hour", Config: perHour}}, 2)
	names := g.Names(redistest.Name(t)+":", "k")
	require.NoError(t, c.Limiter(names[1]).SetRate(ctx, ratelimiter.Config{Rate: 1, Interval: time.Hour}))
	o, err := g.Decide(ctx, g.Target(c, names), 0, false)
	require.NoError(t, err)
	assert.False(t, o.Result.Granted)
	assert.Equal(t, 1, o.Result.Part)
	assert.Equal(t, time.Hour, o.Result.RetryAfter)
	require.ErrorIs(t, o.Note, ratelimiter.ErrPermitsExceedRate)
	assert.Contains(t, o.Note.Error(), names[1])

	_, err = g.Decide(ctx, c.Limiter(names[0]), 0, false)
	assert.ErrorIs(t, err, ratelimiter.ErrInvalidArgument)
	_, err = g.Wait(ctx, c.All(names[0]), 0)
	assert.True(t, errors.Is(err, ratelimiter.ErrInvalidArgument), "%v", err)
}

// A grant after waiting keeps the Part of the refusal before the wait.
func TestDecideRulesWaits(t *testing.T) {
	ctx := context.Background()
	c := ratelimiter.NewClient(redistest.Client(t, redisAddr))
	g := gate.NewRules([]gate.Rule{
		{Name: "hour", Config: perHour},
		{Name: "fast", Config: ratelimiter.Config{Rate: 1, Interval: 200 * time.Millisecond}},
	}, 1)
	names := g.Names(redistest.Name(t)+":", "k")
	_, err := g.Decide(ctx, g.Target(c, names), 0, false)
	require.NoError(t, err)
	o, err := g.Decide(ctx, g.Target(c, names), 10*time.Second, false)
	require.NoError(t, err)
	assert.True(t, o.Result.Granted)
	assert.False(t, o.Exact)
	assert.Equal(t, 1, o.Result.Part)
	assert.Equal(t, int64(1), o.Result.Limit)
}

// A Costed rule is not held to the permits per request; Weighted makes
// the weighted composite of a request, or reports it free when every
// weight is 0 or less.
func TestCostedRules(t *testing.T) {
	rules := []gate.Rule{{Name: "req", Config: perSec}, {Name: "tok", Config: perHour, Costed: true}}
	require.NoError(t, gate.CheckRules(rules, 2), "the costed rule's rate 3 is not checked against 2 per request")
	require.Error(t, gate.CheckRules(rules, 4), "the other rule's is")
	g := gate.NewRules(rules, 1)
	require.True(t, g.Costed())
	require.False(t, gate.NewRules(rules[:1], 1).Costed())
	c := ratelimiter.NewClient(redistest.Client(t, redisAddr))
	names := g.Names("p:", "k")
	tg, free := g.Weighted(c, names, []int64{0, -3})
	require.True(t, free)
	require.Nil(t, tg)
	tg, free = g.Weighted(c, names, []int64{1, -3})
	require.False(t, free)
	require.Equal(t, c.All(names...).Weighted(1, 0), tg, "the costed rule weighs 0 when the cost is negative")
}
