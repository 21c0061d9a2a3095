package ratelimiter_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
)

// readmeACL returns the commands of README.md's least-privilege ACL line
// (the "+name" tokens) and the rest of the line, so that this test and
// the README cannot drift apart.
func readmeACL(t *testing.T) (cmds, rest []string) {
	t.Helper()
	f, err := os.Open("README.md")
	require.NoError(t, err)
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if !strings.HasPrefix(line, "ACL SETUSER ratelimiter ") {
			continue
		}
		for _, tok := range strings.Fields(line)[3:] {
			switch {
			case strings.HasPrefix(tok, "+"):
				cmds = append(cmds, tok[1:])
			case tok == "><password>":
				rest = append(rest, ">pw")
			default:
				rest = append(rest, tok)
			}
		}
		return cmds, rest
	}
	t.Fatal("README.md has no line starting with ACL SETUSER ratelimiter")
	return nil, nil
}

// readmeUser makes (or remakes) the Redis user named user with the
// README's ACL line less the command withheld ("" withholds none), and
// returns a client logged in as it; the caller closes it and deletes the
// user.
func readmeUser(t *testing.T, admin *redis.Client, user, withheld string) *redis.Client {
	t.Helper()
	cmds, rest := readmeACL(t)
	acl := []any{"ACL", "SETUSER", user, "reset"}
	for _, r := range rest {
		acl = append(acl, r)
	}
	for _, c := range cmds {
		if c != withheld {
			acl = append(acl, "+"+c)
		}
	}
	require.NoError(t, admin.Do(context.Background(), acl...).Err())
	return redis.NewClient(&redis.Options{Addr: redisAddr, Username: user, Password: "pw"})
}

// aclState is a limiter state that a denied call must leave as it was.
// Record offsets are ms before now; a record holds 2 permits.
type aclState struct {
	cfg     *ratelimiter.Config // nil: not initialised
	value   string              // "" for no value key
	records []int64
	ttl     time.Duration // on every key; 0: none
}

var aclStates = map[string]aclState{
	"not initialised":  {},
	"fresh":            {cfg: &ratelimiter.Config{Rate: 10, Interval: time.Second}},
	"in the window":    {cfg: &ratelimiter.Config{Rate: 10, Interval: time.Second}, value: "6", records: []int64{100, 50}},
	"some expired":     {cfg: &ratelimiter.Config{Rate: 10, Interval: time.Second}, value: "4", records: []int64{1500, 1200, 10}},
	"value lost":       {cfg: &ratelimiter.Config{Rate: 10, Interval: time.Second}, records: []int64{10, 20, 1500}},
	"exhausted":        {cfg: &ratelimiter.Config{Rate: 4, Interval: time.Minute}, value: "0", records: []int64{10, 20}},
	"per-client":       {cfg: &ratelimiter.Config{Mode: ratelimiter.PerClient, Rate: 10, Interval: time.Second}, value: "6", records: []int64{100, 1500}},
	"keep-alive + TTL": {cfg: &ratelimiter.Config{Rate: 10, Interval: time.Second, KeepAlive: time.Hour}, value: "8", records: []int64{1500}, ttl: time.Hour},
}

// aclOps are the library's calls that reach Redis, on l (its Client made
// with combining on or off as the op's name says) and a composite of l
// alone.
var aclOps = map[string]func(ctx context.Context, l *ratelimiter.Limiter, all *ratelimiter.Composite) error{
	"TrySetRate": func(ctx context.Context, l *ratelimiter.Limiter, _ *ratelimiter.Composite) error {
		_, err := l.TrySetRate(ctx, ratelimiter.Config{Rate: 10, Interval: time.Second, KeepAlive: time.Minute})
		return err
	},
	"SetRate": func(ctx context.Context, l *ratelimiter.Limiter, _ *ratelimiter.Composite) error {
		return l.SetRate(ctx, ratelimiter.Config{Rate: 7, Interval: time.Second})
	},
	"SetRate keep state": func(ctx context.Context, l *ratelimiter.Limiter, _ *ratelimiter.Composite) error {
		return l.SetRate(ctx, ratelimiter.Config{Rate: 7, Interval: time.Second, KeepAlive: time.Minute}, ratelimiter.KeepState())
	},
	"SetRate other mode": func(ctx context.Context, l *ratelimiter.Limiter, _ *ratelimiter.Composite) error {
		return l.SetRate(ctx, ratelimiter.Config{Mode: ratelimiter.PerClient, Rate: 7, Interval: time.Second})
	},
	"UpdateRate": func(ctx context.Context, l *ratelimiter.Limiter, _ *ratelimiter.Composite) error {
		_, err := l.UpdateRate(ctx, ratelimiter.Config{Rate: 7, Interval: time.Second}, ratelimiter.KeepState())
		return err
	},
	"Config": func(ctx context.Context, l *ratelimiter.Limiter, _ *ratelimiter.Composite) error {
		_, err := l.Config(ctx)
		return err
	},
	"TryAcquire": func(ctx context.Context, l *ratelimiter.Limiter, _ *ratelimiter.Composite) error {
		_, err := l.TryAcquire(ctx, 3)
		return err
	},
	"Allow": func(ctx context.Context, l *ratelimiter.Limiter, _ *ratelimiter.Composite) error {
		_, err := l.Allow(ctx, 1)
		return err
	},
	"TryAcquireTimeout": func(ctx context.Context, l *ratelimiter.Limiter, _ *ratelimiter.Composite) error {
		_, err := l.TryAcquireTimeout(ctx, 2, 20*time.Millisecond)
		return err
	},
	"Acquire": func(ctx context.Context, l *ratelimiter.Limiter, _ *ratelimiter.Composite) error {
		ctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		defer cancel()
		return l.Acquire(ctx, 1)
	},
	"All.TryAcquire": func(ctx context.Context, _ *ratelimiter.Limiter, all *ratelimiter.Composite) error {
		_, err := all.TryAcquire(ctx, 2)
		return err
	},
	"All.Allow": func(ctx context.Context, _ *ratelimiter.Limiter, all *ratelimiter.Composite) error {
		_, err := all.Allow(ctx, 1)
		return err
	},
	"All.Weighted.Allow": func(ctx context.Context, _ *ratelimiter.Limiter, all *ratelimiter.Composite) error {
		_, err := all.Weighted(3).Allow(ctx, 1)
		return err
	},
	"All.Release": func(ctx context.Context, _ *ratelimiter.Limiter, all *ratelimiter.Composite) error {
		return all.Weighted(2).Release(ctx, 1)
	},
	"Release": func(ctx context.Context, l *ratelimiter.Limiter, _ *ratelimiter.Composite) error {
		return l.Release(ctx, 3)
	},
	"AvailablePermits": func(ctx context.Context, l *ratelimiter.Limiter, _ *ratelimiter.Composite) error {
		_, err := l.AvailablePermits(ctx)
		return err
	},
	"Expire": func(ctx context.Context, l *ratelimiter.Limiter, _ *ratelimiter.Composite) error {
		_, err := l.Expire(ctx, 2*time.Hour)
		return err
	},
	"ExpireAt": func(ctx context.Context, l *ratelimiter.Limiter, _ *ratelimiter.Composite) error {
		_, err := l.ExpireAt(ctx, time.Now().Add(3*time.Hour))
		return err
	},
	"ClearExpire": func(ctx context.Context, l *ratelimiter.Limiter, _ *ratelimiter.Composite) error {
		_, err := l.ClearExpire(ctx)
		return err
	},
	"RemainTimeToLive": func(ctx context.Context, l *ratelimiter.Limiter, _ *ratelimiter.Composite) error {
		_, err := l.RemainTimeToLive(ctx)
		return err
	},
	"Delete": func(ctx context.Context, l *ratelimiter.Limiter, _ *ratelimiter.Composite) error {
		_, err := l.Delete(ctx)
		return err
	},
	"Exists": func(ctx context.Context, l *ratelimiter.Limiter, _ *ratelimiter.Composite) error {
		_, err := l.Exists(ctx)
		return err
	},
}

// keyState is what a limiter's keys hold: DUMP of each and whether it has
// a TTL (DUMP leaves the TTL out; the TTL itself shrinks as time passes).
func keyState(t *testing.T, rdb *redis.Client, keys []string) map[string]string {
	t.Helper()
	ctx := context.Background()
	p := rdb.Pipeline()
	dumps := make([]*redis.StringCmd, len(keys))
	ttls := make([]*redis.DurationCmd, len(keys))
	for i, k := range keys {
		dumps[i], ttls[i] = p.Dump(ctx, k), p.PTTL(ctx, k)
	}
	_, _ = p.Exec(ctx)
	out := map[string]string{}
	for i, k := range keys {
		if d, err := dumps[i].Result(); err == nil {
			out[k] = fmt.Sprintf("%x ttl:%v", d, ttls[i].Val() > 0)
		} else {
			require.ErrorIs(t, err, redis.Nil)
		}
	}
	return out
}

// writeState puts st on keys as the admin client: records stamped at
// now minus their offsets, in member format Bc0I.
func writeState(t *testing.T, rdb *redis.Client, l *ratelimiter.Limiter, st aclState, now int64) {
	t.Helper()
	ctx := context.Background()
	k := l.Keys()
	p := rdb.TxPipeline()
	p.Del(ctx, k.Config, k.Value, k.ClientValue, k.Permits, k.ClientPermits)
	if st.cfg != nil {
		p.HSet(ctx, k.Config, "rate", st.cfg.Rate, "interval", st.cfg.Interval.Milliseconds(),
			"type", int(st.cfg.Mode), "keepAliveTime", st.cfg.KeepAlive.Milliseconds())
		value, permits := k.Value, k.Permits
		if st.cfg.Mode == ratelimiter.PerClient {
			value, permits = k.ClientValue, k.ClientPermits
		}
		if st.value != "" {
			p.Set(ctx, value, st.value, 0)
		}
		for i, ago := range st.records {
			m := []byte{16, byte(i), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0}
			p.ZAdd(ctx, permits, redis.Z{Score: float64(now - ago), Member: string(m)})
		}
		if st.ttl > 0 {
			for _, key := range []string{k.Config, value, permits} {
				p.PExpire(ctx, key, st.ttl)
			}
		}
	}
	_, err := p.Exec(ctx)
	require.NoError(t, err)
}

// TestDeniedCommandLeavesStateUntouched is issue 22's first item: a user
// with the README's ACL line minus one command, each command in turn, runs
// every library call (combining on and off) on every state of aclStates.
// Any call that fails (but for a context deadline, which a wait may meet
// after script calls that succeeded) must leave the limiter's five keys
// exactly as they were, and every command of the line (+select aside:
// database 0 needs none) must make some call fail. go test -run
// TestDeniedCommandLeavesStateUntouched -v prints the counts.
func TestDeniedCommandLeavesStateUntouched(t *testing.T) {
	admin := newRedis(t)
	ctx := context.Background()
	cmds, _ := readmeACL(t)
	user := "denied-" + strings.ReplaceAll(uniqueName(t), "/", "-")
	t.Cleanup(func() { admin.Do(context.Background(), "ACL", "DELUSER", user) })
	name := uniqueName(t)

	var calls, failed, changed, typed int
	for _, withheld := range cmds {
		as := readmeUser(t, admin, user, withheld)
		anyFailed := false
		for _, batch := range []int{0, 1} {
			now := time.Now().UnixMilli()
			c := ratelimiter.NewClient(as, ratelimiter.WithClientID("c1"), ratelimiter.WithMaxBatch(batch),
				ratelimiter.WithClock(func() time.Time { return time.UnixMilli(now) }), ratelimiter.WithServerClock(false))
			l := c.Limiter(name)
			all := c.All(name)
			keys := []string{l.Keys().Config, l.Keys().Value, l.Keys().ClientValue, l.Keys().Permits, l.Keys().ClientPermits}
			for stName, st := range aclStates {
				for opName, op := range aclOps {
					writeState(t, admin, l, st, now)
					before := keyState(t, admin, keys)
					err := op(ctx, l, all)
					calls++
					if err == nil || errors.Is(err, context.DeadlineExceeded) {
						continue
					}
					anyFailed = true
					failed++
					if errors.Is(err, ratelimiter.ErrPermissionDenied) {
						typed++
					}
					if after := keyState(t, admin, keys); !assertSame(t, before, after) {
						changed++
						t.Errorf("without +%s, %s (batch %d) on %q failed (%v) and changed the state:\nbefore %v\nafter  %v",
							withheld, opName, batch, stName, err, before, after)
					}
				}
			}
		}
		as.Close()
		if withheld != "select" {
			require.True(t, anyFailed, "without +%s every call succeeds: the README lists a command the library does not need", withheld)
		}
	}
	t.Logf("%d calls, %d failed (%d with ErrPermissionDenied), %d of the failures changed the state", calls, failed, typed, changed)
}

func assertSame(t *testing.T, a, b map[string]string) bool {
	t.Helper()
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
