package compat

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	ratelimiter "github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/internal/redistest"
	"github.com/goredisson/ratelimiter/wire"
)

// Scenarios of issue 3, each run for every covered Redisson version in both
// directions: "java-acts-go-checks" (a = Java, b = Go) and
// "go-acts-java-checks" (a = Go, b = Java).

func sameAvailable(t *testing.T, ctx context.Context, p pair, name string, want int64, step string) {
	t.Helper()
	ga := must[int64](t, p.a.String()+" availablePermits")(p.a.available(ctx, name))
	gb := must[int64](t, p.b.String()+" availablePermits")(p.b.available(ctx, name))
	if ga != want || gb != want {
		t.Fatalf("after %s: availablePermits %s=%d %s=%d, want %d on both", step, p.a, ga, p.b, gb, want)
	}
}

func TestConfig(t *testing.T) {
	bothWays(t, nil, func(t *testing.T, v string, p pair) {
		ctx := ctxT(t, time.Minute)
		name := limName(t, "cfg")
		cfg := ratelimiter.Config{Mode: ratelimiter.Overall, Rate: 7, Interval: 1500 * time.Millisecond}
		if ok := must[bool](t, "trySetRate")(p.a.trySetRate(ctx, name, cfg)); !ok {
			t.Fatalf("%s trySetRate on a new limiter = false", p.a)
		}
		if got := must[ratelimiter.Config](t, "getConfig")(p.b.getConfig(ctx, name)); got != cfg {
			t.Fatalf("%s getConfig = %+v, %s set %+v", p.b, got, p.a, cfg)
		}
		other := ratelimiter.Config{Mode: ratelimiter.PerClient, Rate: 99, Interval: 3 * time.Second}
		if ok := must[bool](t, "trySetRate")(p.b.trySetRate(ctx, name, other)); ok {
			t.Fatalf("%s trySetRate over %s's config = true", p.b, p.a)
		}
		if got := must[ratelimiter.Config](t, "getConfig")(p.a.getConfig(ctx, name)); got != cfg {
			t.Fatalf("refused trySetRate changed the config to %+v", got)
		}
		// setRate on the other side replaces the config.
		cfg2 := ratelimiter.Config{Mode: ratelimiter.PerClient, Rate: 3, Interval: 2 * time.Second}
		check(t, p.b.setRate(ctx, name, cfg2, false), "setRate")
		if got := must[ratelimiter.Config](t, "getConfig")(p.a.getConfig(ctx, name)); got != cfg2 {
			t.Fatalf("%s getConfig after %s setRate = %+v, want %+v", p.a, p.b, got, cfg2)
		}
	})
}

func TestInterleavedAcquisitions(t *testing.T) {
	bothWays(t, nil, func(t *testing.T, v string, p pair) {
		ctx := ctxT(t, time.Minute)
		name := limName(t, "il")
		const rate = 10
		interval := time.Second
		check(t, errOnly(p.a.trySetRate(ctx, name, ratelimiter.Config{Rate: rate, Interval: interval})), "trySetRate")
		sameAvailable(t, ctx, p, name, rate, "trySetRate")
		steps := []struct {
			s side
			n int64
		}{{p.a, 1}, {p.b, 2}, {p.a, 3}, {p.b, 1}, {p.a, 4}, {p.b, 3}, {p.a, 1}, {p.b, 1}}
		avail := int64(rate)
		start := time.Now()
		for i, st := range steps {
			got := must[bool](t, "tryAcquire")(st.s.tryAcquire(ctx, name, st.n))
			if want := avail >= st.n; got != want {
				t.Fatalf("step %d: %s tryAcquire(%d) with %d available = %v", i, st.s, st.n, avail, got)
			}
			if got {
				avail -= st.n
			}
			sameAvailable(t, ctx, p, name, avail, "step "+strconv.Itoa(i))
		}
		if el := time.Since(start); el >= interval {
			t.Fatalf("steps took %v, longer than the interval %v: permits may have come back meanwhile", el, interval)
		}
		if avail != 0 {
			t.Fatalf("model: %d left, want 0", avail)
		}
		checkMarks(t, ctx, p, name, 2, 3) // a's grants: 1 and 3; b's: 2, 1 and 3
		// Every permit taken (by both sides, several records) comes back after
		// the interval: b waits on the hints for the whole rate.
		if ok := must[bool](t, "tryAcquireTimeout")(p.b.tryAcquireTimeout(ctx, name, rate, 3*interval)); !ok {
			t.Fatalf("%s tryAcquireTimeout(%d, %v) = false: permits did not come back", p.b, rate, 3*interval)
		}
		sameAvailable(t, ctx, p, name, 0, "b took the whole rate back")
		// And b's single record of `rate` permits comes back to a, which
		// blocks in acquire until then.
		check(t, p.a.acquire(ctx, name, rate), p.a.String()+" acquire(rate)")
		sameAvailable(t, ctx, p, name, 0, "a took the whole rate back")
		// Nothing is left for either side.
		ok := must[bool](t, "tryAcquire")(p.b.tryAcquire(ctx, name, 1))
		if ok {
			t.Fatalf("%s tryAcquire(1) granted with nothing available", p.b)
		}
	})
}

func errOnly[T any](_ T, err error) error { return err }

// checkMarks checks that the window of name holds a's and b's records
// and that exactly Go's are marked, with the Go Client's tag (docs/
// fairness.md): Redisson read the marked records as plain permits, and
// the library tells the two apart.
func checkMarks(t *testing.T, ctx context.Context, p pair, name string, a, b int) {
	t.Helper()
	g, ok := p.a.(goSide)
	goRecords := a
	if !ok {
		g, goRecords = p.b.(goSide), b
	}
	ms, err := rdb(t).ZRange(ctx, g.keys(name).Permits, 0, -1).Result()
	check(t, err, "zrange")
	marked := 0
	for _, m := range ms {
		rec, err := wire.Decode([]byte(m))
		check(t, err, "decode record")
		if rec.GoMarked() {
			marked++
			if tag, ok := rec.GoTag(); rec.Format != wire.FI && (!ok || tag != g.c.RecordTag()) {
				t.Fatalf("Go record %x carries tag %q, %v; want the Client's %q", m, tag, ok, g.c.RecordTag())
			}
		}
	}
	if marked != goRecords || len(ms) != a+b {
		t.Fatalf("%d of %d records marked, want %d of %d (Go's)", marked, len(ms), goRecords, a+b)
	}
}

func TestPerClientBudgets(t *testing.T) {
	bothWays(t, nil, func(t *testing.T, v string, p pair) {
		ctx := ctxT(t, time.Minute)
		name := limName(t, "pc")
		cfg := ratelimiter.Config{Mode: ratelimiter.PerClient, Rate: 3, Interval: time.Minute}
		check(t, errOnly(p.a.trySetRate(ctx, name, cfg)), "trySetRate")
		if !must[bool](t, "a tryAcquire")(p.a.tryAcquire(ctx, name, 2)) {
			t.Fatal("a tryAcquire(2) refused")
		}
		if must[bool](t, "a tryAcquire")(p.a.tryAcquire(ctx, name, 2)) {
			t.Fatal("a tryAcquire(2) with 1 left granted")
		}
		if got := must[int64](t, "b available")(p.b.available(ctx, name)); got != 3 {
			t.Fatalf("%s availablePermits = %d, want its own full budget 3", p.b, got)
		}
		if !must[bool](t, "b tryAcquire")(p.b.tryAcquire(ctx, name, 3)) {
			t.Fatal("b tryAcquire(3) refused")
		}
		if must[bool](t, "b tryAcquire")(p.b.tryAcquire(ctx, name, 1)) {
			t.Fatal("b tryAcquire(1) granted with its budget spent")
		}
		if got := must[int64](t, "a available")(p.a.available(ctx, name)); got != 1 {
			t.Fatalf("%s availablePermits = %d, want 1", p.a, got)
		}
		// The budgets live under each client's own id.
		c := rdb(t)
		keys := goKeys(ratelimiter.NewClient(c), name)
		for _, s := range []struct {
			sd   side
			left string
		}{{p.a, "1"}, {p.b, "0"}} {
			vk, pk := keys.Value+":"+s.sd.id(), keys.Permits+":"+s.sd.id()
			if got, err := c.Get(ctx, vk).Result(); err != nil || got != s.left {
				t.Errorf("%s: GET %s = %q, %v; want %s", s.sd, vk, got, err, s.left)
			}
			if n, err := c.ZCard(ctx, pk).Result(); err != nil || n != 1 {
				t.Errorf("%s: ZCARD %s = %d, %v; want 1", s.sd, pk, n, err)
			}
		}
		if n := c.Exists(ctx, keys.Value, keys.Permits).Val(); n != 0 {
			t.Errorf("OVERALL keys exist (%d) for a PER_CLIENT limiter", n)
		}
		// setRate resets only the caller's own PER_CLIENT budget. Redisson
		// 3.20.1, 3.16.8 and 3.16.3 (observed) delete only the OVERALL keys
		// there, leaving the caller's PER_CLIENT budget as it was.
		check(t, p.a.setRate(ctx, name, cfg, false), "setRate")
		wantA := int64(3)
		if _, isJava := p.a.(javaSide); isJava && !versionAtLeast(v, "3.52.0") {
			wantA = 1
		}
		if got := must[int64](t, "a available")(p.a.available(ctx, name)); got != wantA {
			t.Fatalf("%s availablePermits after its own setRate = %d, want %d", p.a, got, wantA)
		}
		if got := must[int64](t, "b available")(p.b.available(ctx, name)); got != 0 {
			t.Fatalf("%s availablePermits after %s's setRate = %d, want its spent budget 0", p.b, p.a, got)
		}
	})
}

func TestSetRateResets(t *testing.T) {
	bothWays(t, nil, func(t *testing.T, v string, p pair) {
		ctx := ctxT(t, time.Minute)
		name := limName(t, "reset")
		cfg := ratelimiter.Config{Rate: 5, Interval: time.Minute}
		check(t, errOnly(p.a.trySetRate(ctx, name, cfg)), "trySetRate")
		if !must[bool](t, "tryAcquire")(p.b.tryAcquire(ctx, name, 3)) {
			t.Fatal("tryAcquire(3) refused")
		}
		sameAvailable(t, ctx, p, name, 2, "b took 3")
		check(t, p.a.setRate(ctx, name, cfg, false), "setRate")
		sameAvailable(t, ctx, p, name, 5, "a setRate (same config)")
		if !must[bool](t, "tryAcquire")(p.b.tryAcquire(ctx, name, 5)) {
			t.Fatal("tryAcquire(5) after reset refused")
		}
		check(t, p.a.setRate(ctx, name, ratelimiter.Config{Rate: 8, Interval: time.Minute}, false), "setRate 8")
		sameAvailable(t, ctx, p, name, 8, "a setRate(8)")
	})
}

func TestKeepStateAndUpdateRate(t *testing.T) {
	// Before 4.4 the Java API has neither form.
	for _, v := range Versions[1:] {
		j := javaSide{peerFor(t, v)}
		ctx := ctxT(t, 10*time.Second)
		if _, err := j.updateRate(ctx, limName(t, "u"), ratelimiter.Config{Rate: 1, Interval: time.Second}, true); !unsupported(err) {
			t.Errorf("Redisson %s updateRate: %v, want unsupported", v, err)
		}
		if err := j.setRate(ctx, limName(t, "u"), ratelimiter.Config{Rate: 1, Interval: time.Second}, true); !unsupported(err) {
			t.Errorf("Redisson %s setRate(args): %v, want unsupported", v, err)
		}
	}
	bothWays(t, []string{"4.7.0"}, func(t *testing.T, v string, p pair) {
		ctx := ctxT(t, time.Minute)
		name := limName(t, "ks")
		c := rdb(t)
		check(t, errOnly(p.a.trySetRate(ctx, name, ratelimiter.Config{Rate: 10, Interval: time.Minute})), "trySetRate")
		if !must[bool](t, "tryAcquire")(p.b.tryAcquire(ctx, name, 4)) {
			t.Fatal("tryAcquire(4) refused")
		}
		check(t, p.a.setRate(ctx, name, ratelimiter.Config{Rate: 6, Interval: time.Minute}, true), "setRate keepState")
		sameAvailable(t, ctx, p, name, 2, "setRate(6, keepState) with 4 used")
		if got := must[ratelimiter.Config](t, "getConfig")(p.b.getConfig(ctx, name)); got.Rate != 6 {
			t.Fatalf("rate after setRate keepState = %d", got.Rate)
		}
		if !must[bool](t, "updateRate")(p.b.updateRate(ctx, name, ratelimiter.Config{Rate: 3, Interval: time.Minute}, true)) {
			t.Fatal("updateRate on an existing limiter = false")
		}
		// A rate lowered under what is used: Redisson stores 0, Go the debt
		// (3 - 4 = -1, docs/differences.md), which Redisson's availablePermits
		// reports as it is and Go's as 0. Neither side grants.
		step := "updateRate(3, keepState) with 4 used, by " + p.b.String()
		debt := int64(0)
		if _, goActed := p.b.(goSide); goActed {
			debt = -1
			if v := c.Get(ctx, goKeys(ratelimiter.NewClient(c), name).Value).Val(); v != "-1" {
				t.Fatalf("after %s: value %q, want the debt -1", step, v)
			}
		}
		for _, s := range []side{p.a, p.b} {
			want := int64(0)
			if _, isJava := s.(javaSide); isJava {
				want = debt
			}
			if got := must[int64](t, s.String()+" availablePermits")(s.available(ctx, name)); got != want {
				t.Fatalf("after %s: availablePermits %s=%d, want %d", step, s, got, want)
			}
		}
		if must[bool](t, "tryAcquire")(p.a.tryAcquire(ctx, name, 1)) {
			t.Fatal("tryAcquire granted after keepState left nothing")
		}
		if !must[bool](t, "updateRate")(p.a.updateRate(ctx, name, ratelimiter.Config{Rate: 5, Interval: time.Minute}, false)) {
			t.Fatal("updateRate = false")
		}
		sameAvailable(t, ctx, p, name, 5, "updateRate(5) without keepState")
		// updateRate never creates a limiter.
		missing := limName(t, "missing")
		if must[bool](t, "updateRate")(p.a.updateRate(ctx, missing, ratelimiter.Config{Rate: 5, Interval: time.Minute}, true)) {
			t.Fatal("updateRate on a missing limiter = true")
		}
		if must[bool](t, "exists")(p.b.exists(ctx, missing)) {
			t.Fatal("updateRate created the limiter")
		}
		// keepState across a mode change starts fresh (K2..K5 deleted).
		if !must[bool](t, "tryAcquire")(p.b.tryAcquire(ctx, name, 2)) {
			t.Fatal("tryAcquire(2) refused")
		}
		check(t, p.a.setRate(ctx, name, ratelimiter.Config{Mode: ratelimiter.PerClient, Rate: 4, Interval: time.Minute}, true), "setRate per-client keepState")
		keys := goKeys(ratelimiter.NewClient(rdb(t)), name)
		if n := rdb(t).Exists(ctx, keys.Value, keys.Permits).Val(); n != 0 {
			t.Fatalf("OVERALL state survived a mode change (%d keys)", n)
		}
		sameAvailable(t, ctx, p, name, 4, "mode change")
	})
}

func TestReleaseAcrossSides(t *testing.T) {
	bothWays(t, nil, func(t *testing.T, v string, p pair) {
		if _, isJava := p.a.(javaSide); isJava && !versionAtLeast(v, "3.52.0") {
			// Still prove the Java version has no release, then let Go do the releasing.
			err := p.a.release(ctxT(t, 10*time.Second), limName(t, "x"), 1)
			if !unsupported(err) {
				t.Fatalf("Redisson %s release: %v, want unsupported", v, err)
			}
			p = pair{a: p.b, b: p.a}
		}
		ctx := ctxT(t, time.Minute)
		name := limName(t, "rel")
		check(t, errOnly(p.a.trySetRate(ctx, name, ratelimiter.Config{Rate: 5, Interval: time.Minute})), "trySetRate")
		if !must[bool](t, "tryAcquire")(p.b.tryAcquire(ctx, name, 5)) {
			t.Fatal("tryAcquire(5) refused")
		}
		check(t, p.a.release(ctx, name, 2), "release(2)")
		sameAvailable(t, ctx, p, name, 2, p.a.String()+" release(2)")
		if !must[bool](t, "tryAcquire")(p.b.tryAcquire(ctx, name, 2)) {
			t.Fatal("released permits not grantable")
		}
		if must[bool](t, "tryAcquire")(p.b.tryAcquire(ctx, name, 1)) {
			t.Fatal("granted beyond the released permits")
		}
		check(t, p.a.release(ctx, name, 100), "release(100)")
		sameAvailable(t, ctx, p, name, 5, "release(100) capped at rate")
	})
}

func TestExpiryAcrossSides(t *testing.T) {
	bothWays(t, nil, func(t *testing.T, v string, p pair) {
		ctx := ctxT(t, time.Minute)
		name := limName(t, "exp")
		c := rdb(t)
		keys := goKeys(ratelimiter.NewClient(c), name)
		check(t, errOnly(p.a.trySetRate(ctx, name, ratelimiter.Config{Rate: 5, Interval: time.Minute})), "trySetRate")
		if !must[bool](t, "tryAcquire")(p.b.tryAcquire(ctx, name, 1)) {
			t.Fatal("tryAcquire refused")
		}
		if got := must[time.Duration](t, "remainTTL")(p.b.remainTTL(ctx, name)); got != ratelimiter.TTLPersistent {
			t.Fatalf("remainTimeToLive of a persistent limiter = %v", got)
		}
		if !must[bool](t, "expire")(p.a.expire(ctx, name, 30*time.Second, "")) {
			t.Fatal("expire = false")
		}
		ttlIn(t, must[time.Duration](t, "remainTTL")(p.b.remainTTL(ctx, name)), 25*time.Second, 30*time.Second)
		for _, k := range []string{keys.Config, keys.Value, keys.Permits} {
			ttlIn(t, c.PTTL(ctx, k).Val(), 25*time.Second, 30*time.Second)
		}
		if !must[bool](t, "clearExpire")(p.b.clearExpire(ctx, name)) {
			t.Fatal("clearExpire = false")
		}
		if got := must[time.Duration](t, "remainTTL")(p.a.remainTTL(ctx, name)); got != ratelimiter.TTLPersistent {
			t.Fatalf("remainTimeToLive after the other side's clearExpire = %v", got)
		}
		if c.PTTL(ctx, keys.Permits).Val() != -1 {
			t.Fatal("clearExpire left a TTL on the permits key")
		}
		if must[bool](t, "clearExpire")(p.a.clearExpire(ctx, name)) {
			t.Fatal("second clearExpire = true")
		}
		if !must[bool](t, "expireAt")(p.b.expireAt(ctx, name, time.Now().Add(40*time.Second), "")) {
			t.Fatal("expireAt = false")
		}
		ttlIn(t, must[time.Duration](t, "remainTTL")(p.a.remainTTL(ctx, name)), 35*time.Second, 40*time.Second)

		// Conditional forms (Redisson 3.17+ on the Java side).
		flags := func() bool {
			j := javaOf(p)
			_, err := j.expire(ctx, limName(t, "probe"), time.Second, ratelimiter.ExpireNX)
			if unsupported(err) {
				t.Logf("Redisson %s has no conditional expire; skipped that part", v)
				return false
			}
			if err != nil && strings.Contains(err.Error(), "Wrong number of args calling Redis command") {
				// Redisson passes the condition to PEXPIRE, which takes
				// none before Redis 7.0; the library decides it in Lua.
				t.Logf("Redisson %s's conditional expire needs Redis 7.0 or later; skipped that part", v)
				return false
			}
			check(t, err, "probe expire NX")
			ok, err := p.a.expire(ctx, name, 10*time.Second, ratelimiter.ExpireNX)
			check(t, err, "expire NX")
			if ok {
				t.Fatal("expire NX on keys with a TTL = true")
			}
			return true
		}()
		if flags {
			if !must[bool](t, "expire GT")(p.a.expire(ctx, name, 50*time.Second, ratelimiter.ExpireGT)) {
				t.Fatal("expire GT with a later TTL = false")
			}
			ttlIn(t, must[time.Duration](t, "remainTTL")(p.b.remainTTL(ctx, name)), 45*time.Second, 50*time.Second)
			if !must[bool](t, "expire LT")(p.b.expire(ctx, name, 20*time.Second, ratelimiter.ExpireLT)) {
				t.Fatal("expire LT with an earlier TTL = false")
			}
			ttlIn(t, must[time.Duration](t, "remainTTL")(p.a.remainTTL(ctx, name)), 15*time.Second, 20*time.Second)
			if must[bool](t, "expireAt GT")(p.a.expireAt(ctx, name, time.Now().Add(5*time.Second), ratelimiter.ExpireGT)) {
				t.Fatal("expireAt GT with an earlier time = true")
			}
			check(t, errOnly(p.b.clearExpire(ctx, name)), "clearExpire")
			if must[bool](t, "expire XX")(p.a.expire(ctx, name, 10*time.Second, ratelimiter.ExpireXX)) {
				t.Fatal("expire XX on persistent keys = true")
			}
			if !must[bool](t, "expireAt NX")(p.b.expireAt(ctx, name, time.Now().Add(25*time.Second), ratelimiter.ExpireNX)) {
				t.Fatal("expireAt NX on persistent keys = false")
			}
			ttlIn(t, must[time.Duration](t, "remainTTL")(p.a.remainTTL(ctx, name)), 20*time.Second, 25*time.Second)
		}

		// delete / isExists.
		if !must[bool](t, "exists")(p.b.exists(ctx, name)) {
			t.Fatal("isExists = false")
		}
		if !must[bool](t, "delete")(p.a.del(ctx, name)) {
			t.Fatal("delete = false")
		}
		if must[bool](t, "exists")(p.b.exists(ctx, name)) {
			t.Fatal("isExists after the other side's delete = true")
		}
		if n := c.Exists(ctx, keys.Config, keys.Value, keys.Permits).Val(); n != 0 {
			t.Fatalf("%d keys left after delete", n)
		}
		if got := must[time.Duration](t, "remainTTL")(p.b.remainTTL(ctx, name)); got != ratelimiter.TTLMissing {
			t.Fatalf("remainTimeToLive of a deleted limiter = %v", got)
		}
		if must[bool](t, "delete")(p.b.del(ctx, name)) {
			t.Fatal("second delete = true")
		}
		if _, err := p.b.tryAcquire(ctx, name, 1); err == nil {
			t.Fatal("tryAcquire on a deleted limiter succeeded")
		}
	})
}

func ttlIn(t *testing.T, got, lo, hi time.Duration) {
	t.Helper()
	if got < lo || got > hi {
		t.Fatalf("TTL %v, want within [%v, %v]", got, lo, hi)
	}
}

func TestKeepAliveAcrossSides(t *testing.T) {
	versions := []string{}
	for _, v := range Versions {
		if versionAtLeast(v, "3.38.0") {
			versions = append(versions, v)
		}
	}
	bothWays(t, versions, func(t *testing.T, v string, p pair) {
		ctx := ctxT(t, time.Minute)
		name := limName(t, "ka")
		c := rdb(t)
		gc := ratelimiter.NewClient(c)
		keys := goKeys(gc, name)
		keepAlive := time.Second
		cfg := ratelimiter.Config{Rate: 100, Interval: 200 * time.Millisecond, KeepAlive: keepAlive}
		if !must[bool](t, "trySetRate")(p.a.trySetRate(ctx, name, cfg)) {
			t.Fatal("trySetRate = false")
		}
		ttlIn(t, c.PTTL(ctx, keys.Config).Val(), 1, keepAlive)
		if got, err := gc.Limiter(name).Config(ctx); err != nil || got != cfg {
			t.Fatalf("Go Config() = %+v, %v; want %+v", got, err, cfg)
		}
		// Age the limiter, then one use by the other side renews all keys.
		check(t, c.PExpire(ctx, keys.Config, 400*time.Millisecond).Err(), "PEXPIRE")
		if !must[bool](t, "tryAcquire")(p.b.tryAcquire(ctx, name, 1)) {
			t.Fatal("tryAcquire refused")
		}
		for _, k := range []string{keys.Config, keys.Value, keys.Permits} {
			ttlIn(t, c.PTTL(ctx, k).Val(), 401*time.Millisecond, keepAlive)
		}
		// Used only by b for more than twice the keep-alive, a's limiter lives on.
		stop := time.Now().Add(2*keepAlive + 200*time.Millisecond)
		tick := time.NewTicker(keepAlive / 4)
		for time.Now().Before(stop) {
			<-tick.C
			check(t, errOnly(p.b.tryAcquire(ctx, name, 1)), "tryAcquire")
		}
		tick.Stop()
		if !must[bool](t, "exists")(p.a.exists(ctx, name)) {
			t.Fatal("limiter expired although the other side kept using it")
		}
		if got := must[ratelimiter.Config](t, "getConfig")(p.a.getConfig(ctx, name)); got.Rate != 100 {
			t.Fatalf("config after keep-alive: %+v", got)
		}
		// Unused, it goes away by itself.
		deadline := time.Now().Add(keepAlive + 5*time.Second)
		for must[bool](t, "exists")(p.a.exists(ctx, name)) {
			if time.Now().After(deadline) {
				t.Fatalf("limiter still exists %v after its last use", keepAlive+5*time.Second)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if n := c.Exists(ctx, keys.Config, keys.Value, keys.Permits).Val(); n != 0 {
			t.Fatalf("%d keys outlived the keep-alive", n)
		}
	})
}

func TestTaggedNames(t *testing.T) {
	bothWays(t, nil, func(t *testing.T, v string, p pair) {
		ctx := ctxT(t, time.Minute)
		name := "{" + limName(t, "tag") + "}rl"
		c := rdb(t)
		keys := goKeys(ratelimiter.NewClient(c), name)
		check(t, errOnly(p.a.trySetRate(ctx, name, ratelimiter.Config{Rate: 4, Interval: time.Minute})), "trySetRate")
		if !must[bool](t, "b tryAcquire")(p.b.tryAcquire(ctx, name, 1)) || !must[bool](t, "a tryAcquire")(p.a.tryAcquire(ctx, name, 2)) {
			t.Fatal("tryAcquire refused")
		}
		sameAvailable(t, ctx, p, name, 1, "tagged name")
		if keys.Value != name+":value" || keys.Permits != name+":permits" {
			t.Fatalf("Go keys for %q: %+v", name, keys)
		}
		if n := c.Exists(ctx, keys.Config, keys.Value, keys.Permits).Val(); n != 3 {
			t.Fatalf("EXISTS of the three keys = %d", n)
		}
		if n := c.Exists(ctx, "{"+name+"}:value").Val(); n != 0 {
			t.Fatal("a wrapped {name}:value key exists")
		}
	})
}

func TestNameMapper(t *testing.T) {
	for _, v := range Versions {
		t.Run(v, func(t *testing.T) {
			const prefix = "svc:"
			j := javaSide{newPeer(t, v, prefix)}
			g := goSide{c: newGoClient(t, v, ratelimiter.WithNameMapper(func(n string) string { return prefix + n }))}
			for _, p := range []pair{{a: j, b: g}, {a: g, b: j}} {
				t.Run(p.a.String()+"-acts", func(t *testing.T) {
					ctx := ctxT(t, time.Minute)
					name := limName(t, "m")
					c := rdb(t)
					cfg := ratelimiter.Config{Rate: 6, Interval: time.Minute}
					check(t, errOnly(p.a.trySetRate(ctx, name, cfg)), "trySetRate")
					if n := c.Exists(ctx, prefix+name).Val(); n != 1 {
						t.Fatalf("config not under the mapped name %q", prefix+name)
					}
					if n := c.Exists(ctx, name).Val(); n != 0 {
						t.Fatalf("config under the unmapped name %q", name)
					}
					if got := must[ratelimiter.Config](t, "getConfig")(p.b.getConfig(ctx, name)); got != cfg {
						t.Fatalf("getConfig through the mapper = %+v", got)
					}
					if !must[bool](t, "tryAcquire")(p.b.tryAcquire(ctx, name, 2)) || !must[bool](t, "tryAcquire")(p.a.tryAcquire(ctx, name, 1)) {
						t.Fatal("tryAcquire refused")
					}
					sameAvailable(t, ctx, p, name, 3, "mapped acquisitions")
					if n := c.Exists(ctx, "{"+prefix+name+"}:value", "{"+prefix+name+"}:permits").Val(); n != 2 {
						t.Fatalf("value/permits not under the mapped name (%d)", n)
					}
				})
			}
		})
	}
}

// TestErrorsAgree checks that both sides refuse the same misuse.
func TestErrorsAgree(t *testing.T) {
	bothWays(t, nil, func(t *testing.T, v string, p pair) {
		ctx := ctxT(t, time.Minute)
		name := limName(t, "err")
		if _, err := p.b.tryAcquire(ctx, name, 1); err == nil {
			t.Fatal("tryAcquire on an unconfigured limiter succeeded")
		} else if _, isGo := p.b.(goSide); isGo && !errors.Is(err, ratelimiter.ErrNotInitialized) {
			t.Fatalf("Go error %v, want ErrNotInitialized", err)
		}
		check(t, errOnly(p.a.trySetRate(ctx, name, ratelimiter.Config{Rate: 3, Interval: time.Minute})), "trySetRate")
		if _, err := p.b.tryAcquire(ctx, name, 4); err == nil {
			t.Fatal("tryAcquire beyond the rate succeeded")
		} else if _, isGo := p.b.(goSide); isGo && !errors.Is(err, ratelimiter.ErrPermitsExceedRate) {
			t.Fatalf("Go error %v, want ErrPermitsExceedRate", err)
		}
		sameAvailable(t, ctx, p, name, 3, "refused calls")
	})
}

// TestMemberFormatMatters shows why the Go client must write the format the
// Java fleet unpacks. Redisson 3.20.1 unpacks "Bc0I": it reads wire.Bc0I
// records right and misreads wire.Lc0I ones (the layout the first written spec
// attributes to 3.16.4-3.20.x). Redisson 3.16.8 unpacks "Lc0I": it reads
// wire.Lc0I records right, while a wire.Bc0I record makes its scripts
// fail (the first 8 bytes, read as the length, point far past the record).
// formatFor picks the readable format for each.
func TestMemberFormatMatters(t *testing.T) {
	for _, vc := range []struct {
		v            string
		right, wrong wire.Format
	}{
		{"3.20.1", wire.Bc0I, wire.Lc0I},
		{"3.16.8", wire.Lc0I, wire.Bc0I},
	} {
		t.Run(vc.v, func(t *testing.T) {
			if formatFor(vc.v) != vc.right {
				t.Fatalf("formatFor(%s) = %v, but %v is the format it reads", vc.v, formatFor(vc.v), vc.right)
			}
			j := javaSide{peerFor(t, vc.v)}
			for _, f := range []wire.Format{vc.right, vc.wrong} {
				readable := f == vc.right
				t.Run(f.String(), func(t *testing.T) {
					ctx := ctxT(t, time.Minute)
					name := limName(t, "fmt")
					g := goSide{c: ratelimiter.NewClient(rdb(t), ratelimiter.WithMemberFormat(f))}
					interval := 300 * time.Millisecond
					check(t, errOnly(g.trySetRate(ctx, name, ratelimiter.Config{Rate: 10, Interval: interval})), "trySetRate")
					if !must[bool](t, "tryAcquire")(g.tryAcquire(ctx, name, 3)) {
						t.Fatal("tryAcquire(3) refused")
					}
					// A refused call's hint says when Go's record leaves the window;
					// then Java's availablePermits is the first to release it.
					res, err := g.c.Limiter(name).Allow(ctx, 8)
					check(t, err, "Allow(8)")
					if res.Granted || res.RetryAfter <= 0 {
						t.Fatalf("Allow(8) with 7 available = %+v", res)
					}
					time.Sleep(res.RetryAfter)
					avail, err := j.available(ctx, name)
					t.Logf("Redisson %s availablePermits after Go's %v record of 3 expired: %d, %v (right: 10)", vc.v, f, avail, err)
					if readable {
						if err != nil || avail != 10 {
							t.Fatalf("Redisson %s read Go's %v record wrong: available %d, %v; want 10", vc.v, f, avail, err)
						}
						return
					}
					if err == nil && avail == 10 {
						t.Fatalf("Redisson %s read Go's %v record right; expected a misread", vc.v, f)
					}
				})
			}
		})
	}
}

// TestAvailableAfterReleaseAndExpiry covers a deliberate difference: when
// permits given back by release meet records that expire, Redisson's
// availablePermits stores and returns the uncapped sum (more than the rate),
// while the Go library recounts from the records in the window. After
// Redisson stored such a value, Go's tryAcquire recounts too: it never
// grants more than the rate within one interval.
func TestAvailableAfterReleaseAndExpiry(t *testing.T) {
	for _, v := range Versions {
		t.Run(v, func(t *testing.T) {
			j := javaSide{peerFor(t, v)}
			g := goSide{c: newGoClient(t, v)}
			c := rdb(t)
			for _, first := range []side{j, g} {
				t.Run(first.String()+"-counts", func(t *testing.T) {
					ctx := ctxT(t, time.Minute)
					name := limName(t, "rx")
					const rate = 5
					interval := 300 * time.Millisecond
					check(t, errOnly(g.trySetRate(ctx, name, ratelimiter.Config{Rate: rate, Interval: interval})), "trySetRate")
					if !must[bool](t, "tryAcquire")(g.tryAcquire(ctx, name, rate)) {
						t.Fatal("tryAcquire(rate) refused")
					}
					// Give the permits back as Redisson's release does (3.52+):
					// the value rises, the record stays. (Go's Release takes
					// them out of the record instead.)
					check(t, c.Set(ctx, g.keys(name).Value, rate, 0).Err(), "release as Java does")
					// Wait until the record leaves the window, by its score.
					zs := c.ZRangeWithScores(ctx, g.keys(name).Permits, 0, -1).Val()
					if len(zs) != 1 {
						t.Fatalf("%d records, want 1", len(zs))
					}
					time.Sleep(time.Until(time.UnixMilli(int64(zs[0].Score)).Add(interval + time.Millisecond)))
					got := must[int64](t, "availablePermits")(first.available(ctx, name))
					if _, isJava := first.(javaSide); isJava {
						if got != 2*rate {
							t.Fatalf("Redisson %s availablePermits = %d, expected its uncapped sum %d", v, got, 2*rate)
						}
					} else if got != rate {
						t.Fatalf("Go availablePermits = %d, want %d", got, rate)
					}
					// 3*rate tryAcquire(1) in a row by a Go client whose clock
					// keeps the exact stamp of every call.
					var stamp int64
					// (No clock check: it would read this clock from another
					// goroutine.)
					gc := goSide{c: newGoClient(t, v, ratelimiter.WithClockCheck(-1), ratelimiter.WithServerClock(false), ratelimiter.WithClock(func() time.Time {
						now := time.Now()
						stamp = now.UnixMilli()
						return now
					}))}
					var grants []int64
					firstGranted := 0
					for i := 0; i < 3*rate; i++ {
						if must[bool](t, "tryAcquire")(gc.tryAcquire(ctx, name, 1)) {
							grants = append(grants, stamp)
							if i < rate {
								firstGranted++
							}
						}
					}
					byTime := append([]int64(nil), grants...)
					sort.Slice(byTime, func(i, j int) bool { return byTime[i] < byTime[j] })
					worst, _ := redistest.WorstWindow(byTime, interval.Milliseconds())
					t.Logf("%s availablePermits = %d (rate %d); then Go's tryAcquire(1) granted %d of %d, at most %d within one interval", first, got, rate, len(grants), 3*rate, worst)
					if worst > rate {
						t.Fatalf("after %s stored %d, Go granted %d (> rate %d) within one interval (grant stamps %v)", first, got, worst, rate, grants)
					}
					if firstGranted != rate {
						t.Fatalf("Go granted %d of the first %d tryAcquire(1) on a window with nothing in it", firstGranted, rate)
					}
				})
			}
		})
	}
}
