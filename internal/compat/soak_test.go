package compat

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	ratelimiter "github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/internal/redisproc"
)

// TestSoak runs Go and the real Redisson 4.7.0 together on three limiters
// (OVERALL, PER_CLIENT, OVERALL with keep-alive) for SOAK_DURATION (60 s
// unless set; `make soak` runs 10 minutes), with every operation (try,
// blocking, Allow, release, availablePermits, setRate with keepState) and a
// fault every few seconds against its own redis-server: CLIENT KILL, DEBUG
// SLEEP, SCRIPT FLUSH, and a restart that keeps the data (AOF). It checks,
// from every permit record ever seen, that no window of the interval less
// soakSlack holds more than the rate;
// that no Go call returns later than its deadline + 50 ms, except during a
// measured stall of this process; and that goroutines come back to where
// they were.
func TestSoak(t *testing.T) {
	needJava(t)
	dur := time.Minute
	if d, err := time.ParseDuration(os.Getenv("SOAK_DURATION")); err == nil {
		dur = d
	}
	ctx := ctxT(t, dur+3*time.Minute)
	srv, err := redisproc.StartWrapped(ctx, nil, "--appendonly", "yes", "--enable-debug-command", "local")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	peer, err := StartPeer(ctx, PeerOptions{Version: "4.7.0", Addr: srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = peer.Close() })
	baseline := runtime.NumGoroutine()

	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	client := ratelimiter.NewClient(rdb)
	cfgs := map[string]ratelimiter.Config{
		"soak:overall":   {Rate: 50, Interval: time.Second},
		"soak:perclient": {Mode: ratelimiter.PerClient, Rate: 20, Interval: 500 * time.Millisecond},
		"soak:keepalive": {Rate: 30, Interval: time.Second, KeepAlive: 5 * time.Second},
	}
	watch := map[string]*recordLog{}
	for name, cfg := range cfgs {
		l := client.Limiter(name)
		if err := l.SetRate(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		key := l.Keys().Permits
		if cfg.Mode == ratelimiter.PerClient {
			key = l.Keys().ClientPermits
		}
		watch[name] = &recordLog{key: key, interval: cfg.Interval, seen: map[string]seenRecord{}}
	}

	end := time.Now().Add(dur)
	var wg sync.WaitGroup
	var stalls stallLog
	var calls, late, hung, failed, granted atomic.Int64
	var lateMu sync.Mutex
	var lates []string
	run := func(f func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				f()
			}
		}()
	}
	run(stalls.watch)
	watchCtx, stopWatch := context.WithCancel(ctx)
	for _, w := range watch {
		wg.Add(1)
		go func() { defer wg.Done(); w.sample(watchCtx, rdb) }()
	}
	// Go: four workers on the OVERALL limiters, one on PER_CLIENT.
	timed := func(deadline time.Duration, call func(ctx context.Context) (bool, error)) {
		cctx, cancel := context.WithTimeout(ctx, deadline)
		start := time.Now()
		ok, err := call(cctx)
		took := time.Since(start)
		cancel()
		calls.Add(1)
		if ok {
			granted.Add(1)
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			failed.Add(1) // the faults: connections killed, Redis asleep or restarting
		}
		if took > deadline+time.Second {
			hung.Add(1)
		}
		if took > deadline+50*time.Millisecond && !stalls.during(start, start.Add(took)) {
			late.Add(1)
			lateMu.Lock()
			lates = append(lates, fmt.Sprintf("%v after %v", took.Round(time.Millisecond), start.Format("15:04:05.000")))
			lateMu.Unlock()
		}
	}
	for i := 0; i < 4; i++ {
		l := client.Limiter([]string{"soak:overall", "soak:keepalive"}[i%2])
		step := 0
		run(func() {
			step++
			switch step % 5 {
			case 0:
				timed(300*time.Millisecond, func(c context.Context) (bool, error) {
					err := l.Acquire(c, 1)
					return err == nil, err
				})
			case 1:
				timed(300*time.Millisecond, func(c context.Context) (bool, error) {
					r, err := l.Allow(c, 2)
					return r.Granted, err
				})
			case 2:
				timed(300*time.Millisecond, func(c context.Context) (bool, error) {
					return l.TryAcquireTimeout(c, 1, 100*time.Millisecond)
				})
			case 3:
				timed(300*time.Millisecond, func(c context.Context) (bool, error) {
					ok, err := l.TryAcquire(c, 1)
					if ok && err == nil {
						err = l.Release(c, 1) // used nothing after all
					}
					return false, err
				})
			default:
				timed(300*time.Millisecond, func(c context.Context) (bool, error) {
					_, err := l.AvailablePermits(c)
					return false, err
				})
			}
			time.Sleep(2 * time.Millisecond)
		})
	}
	pc := client.Limiter("soak:perclient")
	run(func() {
		timed(300*time.Millisecond, func(c context.Context) (bool, error) { return pc.TryAcquire(c, 1) })
		time.Sleep(5 * time.Millisecond)
	})
	// setRate with keepState on the keep-alive limiter, every 3 s.
	run(func() {
		time.Sleep(3 * time.Second)
		timed(time.Second, func(c context.Context) (bool, error) {
			return false, client.Limiter("soak:keepalive").SetRate(c, cfgs["soak:keepalive"], ratelimiter.KeepState())
		})
	})
	// Java: 2 threads, try and blocking in turn, on the OVERALL limiters.
	var javaGrants atomic.Int64
	javaStep := 0
	run(func() {
		javaStep++
		name, mode := "soak:overall", "try"
		if javaStep%2 == 0 {
			name, mode = "soak:keepalive", "acquire"
		}
		s, err := peer.Do(ctx, "load", name, 2, 2000, mode, 1)
		if err == nil {
			var n int64
			fmt.Sscan(s, &n)
			javaGrants.Add(n)
		}
	})
	// Faults.
	faults := map[string]int{}
	faultStep := 0
	run(func() {
		time.Sleep(4 * time.Second)
		faultStep++
		admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
		defer admin.Close()
		var err error
		switch kind := []string{"client kill", "debug sleep", "script flush", "restart"}[faultStep%4]; kind {
		case "client kill":
			err = admin.Do(ctx, "CLIENT", "KILL", "TYPE", "normal").Err()
			faults[kind]++
		case "debug sleep":
			err = admin.Do(ctx, "DEBUG", "SLEEP", "0.2").Err()
			faults[kind]++
		case "script flush":
			err = admin.ScriptFlush(ctx).Err()
			faults[kind]++
		case "restart":
			err = srv.Restart(ctx)
			faults[kind]++
		}
		if err != nil && ctx.Err() == nil {
			t.Logf("fault: %v", err)
		}
	})
	time.Sleep(time.Until(end))
	time.Sleep(2500 * time.Millisecond) // the last Java load and records
	stopWatch()
	wg.Wait()
	_ = rdb.Close()

	t.Logf("SOAK %v: %d Go calls (%d granted, %d failed with a Redis error), %d Java grants, faults %v, %d late calls, %d stalls of this process over 40 ms",
		dur, calls.Load(), granted.Load(), failed.Load(), javaGrants.Load(), faults, late.Load(), stalls.count())
	names := make([]string, 0, len(watch))
	for n := range watch {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		w := watch[name]
		full, _ := w.worst(w.interval)
		tol, _ := w.worst(w.interval - stampTolerance*time.Millisecond)
		worst, at := w.worst(w.interval - soakSlack)
		t.Logf("SOAK %s: %d records; most permits in a window of %v: %d, of %v: %d, of %v: %d (at %d); rate %d",
			name, len(w.seen), w.interval, full, w.interval-stampTolerance*time.Millisecond, tol, w.interval-soakSlack, worst, at, cfgs[name].Rate)
		if worst > cfgs[name].Rate {
			t.Errorf("%s: %d permits within %v, rate %d", name, worst, w.interval-soakSlack, cfgs[name].Rate)
		}
	}
	if late.Load() > 0 {
		t.Logf("SOAK %d calls past their deadline + 50 ms, outside stalls of this process: %v", late.Load(), lates)
	}
	if hung.Load() > 0 || late.Load()*1000 > calls.Load() {
		t.Errorf("%d calls past their deadline + 1 s; %d of %d past deadline + 50 ms", hung.Load(), late.Load(), calls.Load())
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > baseline+2 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > baseline+2 {
		t.Errorf("%d goroutines after the soak, %d before", n, baseline)
	}
}

// soakSlack is the stamp slack of the mixed load (stampTolerance) plus the
// longest fault that holds Redis still (DEBUG SLEEP 0.2): calls that read
// their clock before the pause run after it, in any order, so a record can
// land up to the pause inside a window that a later-stamped call already
// closed (docs/differences.md, "Racing calls and the window edge").
const soakSlack = stampTolerance*time.Millisecond + 200*time.Millisecond

// seenRecord is a permit record as last seen.
type seenRecord struct {
	score   int64
	permits int64
	last    time.Time // when last seen
}

// recordLog keeps every permit record of one key ever seen. A record that
// disappears while still in its window was released (or shrunk by a
// release, which rewrites it under a new member): it counts with what is
// left of it.
type recordLog struct {
	key      string
	interval time.Duration
	mu       sync.Mutex
	seen     map[string]seenRecord // by member without its count
}

func (w *recordLog) sample(ctx context.Context, rdb *redis.Client) {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		zs, err := rdb.ZRangeWithScores(ctx, w.key, 0, -1).Result()
		if err != nil {
			continue // a fault; the next sample catches up
		}
		now := time.Now()
		present := map[string]bool{}
		w.mu.Lock()
		for _, z := range zs {
			m := z.Member.(string)
			id := m[:len(m)-4] + fmt.Sprint(int64(z.Score))
			present[id] = true
			w.seen[id] = seenRecord{score: int64(z.Score), permits: int64(binary.LittleEndian.Uint32([]byte(m[len(m)-4:]))), last: now}
		}
		for id, r := range w.seen {
			// Gone well before its interval ended: released.
			if !present[id] && r.permits > 0 && now.UnixMilli() < r.score+w.interval.Milliseconds()-stampTolerance {
				r.permits = 0
				w.seen[id] = r
			}
		}
		w.mu.Unlock()
	}
}

// worst returns the most permits in any window [t, t+win) of the records'
// scores, and where it starts.
func (w *recordLog) worst(win time.Duration) (int64, int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	type at struct{ t, n int64 }
	var xs []at
	for _, r := range w.seen {
		xs = append(xs, at{r.score, r.permits})
	}
	sort.Slice(xs, func(i, j int) bool { return xs[i].t < xs[j].t })
	var best, start, sum int64
	j := 0
	for i := range xs {
		for j < len(xs) && xs[j].t < xs[i].t+win.Milliseconds() {
			sum += xs[j].n
			j++
		}
		if sum > best {
			best, start = sum, xs[i].t
		}
		sum -= xs[i].n
	}
	return best, start
}

// stallLog records the moments this process did not run for over 40 ms.
type stallLog struct {
	mu     sync.Mutex
	stalls [][2]time.Time
}

func (s *stallLog) watch() {
	prev := time.Now()
	time.Sleep(10 * time.Millisecond)
	if now := time.Now(); now.Sub(prev) > 50*time.Millisecond {
		s.mu.Lock()
		s.stalls = append(s.stalls, [2]time.Time{prev, now})
		s.mu.Unlock()
	}
}

func (s *stallLog) during(from, to time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.stalls {
		if st[0].Before(to) && st[1].After(from) {
			return true
		}
	}
	return false
}

func (s *stallLog) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.stalls)
}
