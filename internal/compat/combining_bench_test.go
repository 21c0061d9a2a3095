package compat

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	ratelimiter "github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/internal/redistest"
)

// BenchmarkCombining prints what combining buys on one hot OVERALL limiter
// against one local redis-server (README, "Combining"), every contender in
// the same run, rounds alternated, medians and ratios:
//
//	go test ./internal/compat -run '^$' -bench Combining -benchtime 1x -v
//
// It reports; it asserts nothing about speed (the machine is shared and
// noisy). COMBINING_ROUND sets each contender's time per round (default
// 2s); COMBINING_ROUNDS the rounds (default 3).
func BenchmarkCombining(b *testing.B) {
	needJava(b)
	round := 2 * time.Second
	if d, err := time.ParseDuration(os.Getenv("COMBINING_ROUND")); err == nil {
		round = d
	}
	rounds := 3
	if n, err := strconv.Atoi(os.Getenv("COMBINING_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	peer := peerFor(b, "4.7.0")
	c := rdb(b)
	for i := 0; i < b.N; i++ {
		throughput(b, c, peer, round, rounds)
		waiters(b, c, peer, round*5)
		memoryPerPermit(b, c, peer)
		latency(b, c, rounds)
	}
}

// contender takes permits on the limiter called name for d with callers
// concurrent callers and returns the grants.
type contender struct {
	name string
	run  func(ctx context.Context, name string, callers int, d time.Duration) int64
}

func contenders(b *testing.B, c *redis.Client, peer *Peer) []contender {
	goSide := func(opts ...ratelimiter.Option) func(ctx context.Context, name string, callers int, d time.Duration) int64 {
		cl := ratelimiter.NewClient(c, opts...)
		return func(ctx context.Context, name string, callers int, d time.Duration) int64 {
			l := cl.Limiter(name)
			return hammer(callers, d, func() bool {
				ok, err := l.TryAcquire(ctx, 1)
				if err != nil {
					b.Fatal(err)
				}
				return ok
			})
		}
	}
	oneCommand := redis.NewScript(`return redis.call('INCR', KEYS[1])`)
	return []contender{
		{"combined (default)", goSide()},
		{"uncombined (WithMaxBatch(1))", goSide(ratelimiter.WithMaxBatch(1))},
		{"Redisson 4.7.0", func(ctx context.Context, name string, callers int, d time.Duration) int64 {
			s, err := peer.Do(ctx, "load", name, callers, d.Milliseconds(), "try", 1)
			if err != nil {
				b.Fatal(err)
			}
			n, _ := strconv.ParseInt(strings.Fields(s)[0], 10, 64)
			return n
		}},
		{"one-command script (calls)", func(ctx context.Context, name string, callers int, d time.Duration) int64 {
			return hammer(callers, d, func() bool {
				if err := oneCommand.Run(ctx, c, []string{name + ":incr"}).Err(); err != nil {
					b.Fatal(err)
				}
				return true
			})
		}},
	}
}

// hammer runs callers goroutines calling try for d; it returns the trues.
func hammer(callers int, d time.Duration, try func() bool) int64 {
	var n atomic.Int64
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	for i := 0; i < callers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				if try() {
					n.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return n.Load()
}

// redisCPU returns the server's used CPU (user + sys).
func redisCPU(b *testing.B, c *redis.Client) time.Duration {
	info := c.Info(context.Background(), "cpu").Val()
	var total float64
	for _, f := range []string{"used_cpu_sys:", "used_cpu_user:"} {
		i := strings.Index(info, f)
		if i < 0 {
			b.Fatalf("INFO cpu has no %s", f)
		}
		rest := info[i+len(f):]
		v, err := strconv.ParseFloat(strings.TrimSpace(rest[:strings.IndexAny(rest, "\r\n")]), 64)
		if err != nil {
			b.Fatal(err)
		}
		total += v
	}
	return time.Duration(total * float64(time.Second))
}

func throughput(b *testing.B, c *redis.Client, peer *Peer, round time.Duration, rounds int) {
	ctx := context.Background()
	cs := contenders(b, c, peer)
	b.Logf("THROUGHPUT on one hot OVERALL limiter (every call granted), %v per contender per round, %d rounds alternated, medians", round, rounds)
	b.Logf("| callers | contender | grants/s | Redis CPU µs per grant | grants/s vs Redisson | CPU per grant vs Redisson |")
	b.Logf("|---|---|---|---|---|---|")
	for _, callers := range []int{1, 16, 64, 256} {
		rate := make([][]float64, len(cs))
		cpu := make([][]float64, len(cs))
		for r := 0; r < rounds; r++ {
			for i, ct := range cs {
				name := limName(b, fmt.Sprintf("tp-%d-%d-%d", callers, r, i))
				l := ratelimiter.NewClient(c).Limiter(name)
				if _, err := l.TrySetRate(ctx, ratelimiter.Config{Rate: 1 << 50, Interval: time.Hour}); err != nil {
					b.Fatal(err)
				}
				before := redisCPU(b, c)
				start := time.Now()
				n := ct.run(ctx, name, callers, round)
				el := time.Since(start)
				used := redisCPU(b, c) - before
				rate[i] = append(rate[i], float64(n)/el.Seconds())
				cpu[i] = append(cpu[i], float64(used.Microseconds())/float64(max(n, 1)))
				c.Del(ctx, l.Keys().Config, l.Keys().Value, l.Keys().Permits, name+":incr")
			}
		}
		ref := 2 // Redisson
		for i, ct := range cs {
			b.Logf("| %d | %s | %.0f | %.2f | %.2fx | %.2fx |", callers, ct.name, median(rate[i]), median(cpu[i]),
				median(rate[i])/median(rate[ref]), median(cpu[i])/median(cpu[ref]))
		}
	}
}

// waiters: 100 blocked callers on a 10/s limiter.
func waiters(b *testing.B, c *redis.Client, peer *Peer, d time.Duration) {
	ctx := context.Background()
	const rate, interval, callers = 10, time.Second, 100
	b.Logf("WAITERS: %d callers in Acquire(1) on a %d/%v limiter for %v", callers, rate, interval, d)
	b.Logf("| contender | grants | allowed | script calls | calls per grant |")
	b.Logf("|---|---|---|---|---|")
	run := map[string]func(name string) int64{
		"combined (default)": func(name string) int64 {
			return acquireLoop(ctx, ratelimiter.NewClient(c).Limiter(name), callers, d)
		},
		"uncombined (WithMaxBatch(1))": func(name string) int64 {
			return acquireLoop(ctx, ratelimiter.NewClient(c, ratelimiter.WithMaxBatch(1)).Limiter(name), callers, d)
		},
		"Redisson 4.7.0": func(name string) int64 {
			s, err := peer.Do(ctx, "load", name, callers, d.Milliseconds(), "acquire", 1)
			if err != nil {
				b.Fatal(err)
			}
			n, _ := strconv.ParseInt(strings.Fields(s)[0], 10, 64)
			return n
		},
	}
	for _, who := range []string{"combined (default)", "uncombined (WithMaxBatch(1))", "Redisson 4.7.0"} {
		name := limName(b, "waiters")
		l := ratelimiter.NewClient(c).Limiter(name)
		if _, err := l.TrySetRate(ctx, ratelimiter.Config{Rate: rate, Interval: interval}); err != nil {
			b.Fatal(err)
		}
		calls := redistest.ScriptCalls(b, c)
		start := time.Now()
		n := run[who](name)
		allowed := rate * (1 + int64(time.Since(start)/interval))
		made := redistest.ScriptCalls(b, c) - calls
		b.Logf("| %s | %d | %d | %d | %.2f |", who, n, allowed, made, float64(made)/float64(max(n, 1)))
	}
}

// acquireLoop runs callers goroutines that Acquire(1) until d has passed;
// it returns the grants.
func acquireLoop(ctx context.Context, l *ratelimiter.Limiter, callers int, d time.Duration) int64 {
	rctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var n atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < callers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for l.Acquire(rctx, 1) == nil {
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	return n.Load()
}

// memoryPerPermit: a 10,000/s limiter under full demand; MEMORY USAGE of
// its permits set over the permits it holds.
func memoryPerPermit(b *testing.B, c *redis.Client, peer *Peer) {
	ctx := context.Background()
	const rate = 10000
	b.Logf("MEMORY per permit in the window, %d/s limiter at full demand (64 callers, 1.5 s)", rate)
	b.Logf("| contender | permits in the window | records | bytes per permit |")
	b.Logf("|---|---|---|---|")
	for _, ct := range contenders(b, c, peer)[:3] {
		name := limName(b, "mem")
		l := ratelimiter.NewClient(c).Limiter(name)
		if _, err := l.TrySetRate(ctx, ratelimiter.Config{Rate: rate, Interval: time.Second}); err != nil {
			b.Fatal(err)
		}
		ct.run(ctx, name, 64, 1500*time.Millisecond)
		recs := c.ZRange(ctx, l.Keys().Permits, 0, -1).Val()
		var permits int64
		for _, m := range recs {
			permits += int64(m[len(m)-4]) | int64(m[len(m)-3])<<8 | int64(m[len(m)-2])<<16 | int64(m[len(m)-1])<<24
		}
		bytes, err := c.MemoryUsage(ctx, l.Keys().Permits, 0).Result()
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("| %s | %d | %d | %.1f |", ct.name, permits, len(recs), float64(bytes)/float64(max(permits, 1)))
	}
}

// latency: one caller, p50 of TryAcquire, combined vs uncombined.
func latency(b *testing.B, c *redis.Client, rounds int) {
	ctx := context.Background()
	const calls = 2000
	clients := map[string]*ratelimiter.Client{
		"combined (default)":           ratelimiter.NewClient(c),
		"uncombined (WithMaxBatch(1))": ratelimiter.NewClient(c, ratelimiter.WithMaxBatch(1)),
	}
	order := []string{"combined (default)", "uncombined (WithMaxBatch(1))"}
	p50 := map[string][]float64{}
	for r := 0; r < rounds; r++ {
		for _, who := range order {
			name := limName(b, "lat")
			l := clients[who].Limiter(name)
			if _, err := l.TrySetRate(ctx, ratelimiter.Config{Rate: 1 << 50, Interval: time.Hour}); err != nil {
				b.Fatal(err)
			}
			tctx, cancel := context.WithTimeout(ctx, time.Minute) // a deadline, as services set
			ds := make([]float64, calls)
			for i := range ds {
				start := time.Now()
				if _, err := l.TryAcquire(tctx, 1); err != nil {
					b.Fatal(err)
				}
				ds[i] = float64(time.Since(start).Microseconds())
			}
			cancel()
			p50[who] = append(p50[who], median(ds))
		}
	}
	b.Logf("LATENCY of one uncontended TryAcquire (context with deadline), %d calls per round, %d rounds: p50 combined %.0f µs, uncombined %.0f µs, ratio %.3f",
		calls, rounds, median(p50[order[0]]), median(p50[order[1]]), median(p50[order[0]])/median(p50[order[1]]))
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}
