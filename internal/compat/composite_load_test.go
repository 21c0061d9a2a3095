package compat

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	ratelimiter "github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/internal/redistest"
)

// TestCompositeMixedLoad: two limiters sharing one hash tag, a short one
// (100 per second) and a longer one (300 per 2 s), taken at once by Go
// composite callers (six goroutines sharing one Client, so their calls
// are combined) while Go single-part callers (one goroutine per part) and
// Redisson single-part callers (two threads per part, one peer per part)
// take from one part each, all as fast as they can for 4 s: first with
// tryAcquire, then with blocking acquire (the composite's goroutines wait
// for both parts at once; Redisson's threads got 14 to 184 permits a part
// in 8 runs, where before Go's waiters yielded to Redisson's retries they
// got as few as 2). From the exact scores of every
// permit record of each part (an observer reads both sorted sets faster
// than records can expire), as TestMixedLoad checks one limiter:
//   - each part's records hold exactly the permits granted on it (Java's
//     and Go's single-part grants on that part plus the composite's);
//   - no window of the part's interval (less stampTolerance) holds more
//     than its rate;
//   - at least 90% of the part's rate x duration is granted within the
//     run (the limit is reached);
//   - every side (the composite, Go on each part, Java on each part) got
//     permits.
//
// The rates are high enough that a burst of freed permits takes a while
// to hand out, and the composite has six goroutines: it needs a permit of
// both parts at once, and with 20 per second, 60 or 40 per 2 to 4 s and
// two goroutines it got as few as 0 permits in a run against the pollers
// (with these figures, 22 to 106 in tryAcquire runs).
func TestCompositeMixedLoad(t *testing.T) {
	for _, v := range []string{"4.7.0", "3.16.3"} {
		t.Run(v, func(t *testing.T) {
			peers := []*Peer{peerFor(t, v), newPeer(t, v, "")}
			for _, mode := range []string{"try", "acquire"} {
				t.Run(mode, func(t *testing.T) { compositeLoad(t, v, peers, mode, 4*time.Second) })
			}
		})
	}
}

// loadPart is one part of the composite under load and what each side got.
type loadPart struct {
	name       string
	cfg        ratelimiter.Config
	permits    string // the key of its sorted set of permit records
	java, gone int    // grants of Java's threads and of Go's single-part goroutine
	javaErr    error
	scores     []int64 // one per permit held by the records seen
	records    int
	lag        int64 // the longest time from a record's score to the read that first saw it, ms
	mayStarve  bool  // the composite's share may be 0 (weighted try: see weightedLoad)
	// floor: the least percent of rate x duration granted within the
	// run; 0: 90.
	floor int
}

// compositeLoad runs the load of TestCompositeMixedLoad; Java's threads
// on part i run in peers[i].
func compositeLoad(t *testing.T, v string, peers []*Peer, mode string, dur time.Duration) {
	ctx := ctxT(t, dur+2*time.Minute)
	tag := fmt.Sprintf("{mix-%d}", time.Now().UnixNano()) // fresh limiters for every run (-count)
	parts := []*loadPart{
		{name: limName(t, tag+":short"), cfg: ratelimiter.Config{Rate: 100, Interval: time.Second}},
		{name: limName(t, tag+":long"), cfg: ratelimiter.Config{Rate: 300, Interval: 2 * time.Second}},
	}
	// Go: the composite's goroutines share one Client (combined calls);
	// the single-part goroutines share another. Both exist before Java's
	// load starts.
	quotaClient, single := newGoClient(t, v), newGoClient(t, v)
	var wg sync.WaitGroup
	names, stopObserver := startMixed(ctx, t, v, peers, parts, mode, dur, &wg)
	start := time.Now()
	deadline := start.Add(dur)
	quota := quotaClient.All(names...)
	var mu sync.Mutex
	var composite int
	var goErr error
	run := func(take func(context.Context) (bool, error), add func(int)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := goLoad(ctx, deadline, take)
			mu.Lock()
			defer mu.Unlock()
			add(n)
			if err != nil && goErr == nil {
				goErr = err
			}
		}()
	}
	for range 6 {
		run(takeWith(quota, mode), func(n int) { composite += n })
	}
	for _, p := range parts {
		run(takeWith(single.Limiter(p.name), mode), func(n int) { p.gone += n })
	}
	wg.Wait()
	finishMixed(t, v, mode, parts, stopObserver, goErr, func(int) int { return composite }, start, dur)
}

// startMixed configures parts, starts the record observer on them and a
// Java load on each (on peers[i], counted in wg), and returns the parts'
// names and the observer's stop.
func startMixed(ctx context.Context, t *testing.T, v string, peers []*Peer, parts []*loadPart, mode string, dur time.Duration, wg *sync.WaitGroup) ([]string, func() error) {
	setup := newGoClient(t, v)
	names := make([]string, len(parts))
	for i, p := range parts {
		rl := setup.Limiter(p.name)
		if _, err := rl.TrySetRate(ctx, p.cfg); err != nil {
			t.Fatal(err)
		}
		p.permits, names[i] = goKeys(setup, p.name).Permits, p.name
	}
	stop := observeRecords(ctx, rdb(t), parts)
	for i, p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.java, p.javaErr = javaLoad(ctx, peers[i], p.name, mode, dur)
		}()
	}
	return names, stop
}

// finishMixed stops the observer and checks every part, after the loads:
// composite(i) is the permits the composite took from part i.
func finishMixed(t *testing.T, v, mode string, parts []*loadPart, stop func() error, goErr error, composite func(i int) int, start time.Time, dur time.Duration) {
	if err := stop(); err != nil {
		t.Fatalf("observer: %v", err)
	}
	if goErr != nil {
		t.Fatalf("go worker: %v", goErr)
	}
	for i, p := range parts {
		if p.javaErr != nil {
			t.Fatalf("java load on %s: %v", p.name, p.javaErr)
		}
		checkPart(t, v, mode, p, composite(i), start, dur)
	}
}

// acquirer is what the Go workers call: a Limiter or a Composite.
type acquirer interface {
	TryAcquire(ctx context.Context, n int64) (bool, error)
	Acquire(ctx context.Context, n int64) error
}

// takeWith returns one acquisition of a permit from a in mode.
func takeWith(a acquirer, mode string) func(context.Context) (bool, error) {
	if mode == "try" {
		return func(ctx context.Context) (bool, error) { return a.TryAcquire(ctx, 1) }
	}
	return func(ctx context.Context) (bool, error) { return true, a.Acquire(ctx, 1) }
}

// goLoad calls take until deadline and returns the grants.
func goLoad(ctx context.Context, deadline time.Time, take func(context.Context) (bool, error)) (int, error) {
	wctx, cancel := context.WithDeadline(ctx, deadline.Add(5*time.Second))
	defer cancel()
	n := 0
	for time.Now().Before(deadline) {
		ok, err := take(wctx)
		if err != nil {
			return n, err
		}
		if ok {
			n++
		}
	}
	return n, nil
}

// javaLoad runs two Redisson threads on name for dur and returns their
// grants.
func javaLoad(ctx context.Context, p *Peer, name, mode string, dur time.Duration) (int, error) {
	s, err := p.Do(ctx, "load", name, 2, dur.Milliseconds(), mode, 1)
	if err != nil {
		return 0, err
	}
	f := strings.Fields(s)
	n, err := strconv.Atoi(f[0])
	if err != nil || len(f) != n+1 {
		return 0, fmt.Errorf("load answer %.40q: count %d, %d times", s, n, len(f)-1)
	}
	return n, nil
}

// observeRecords reads every part's permit records with their scores
// every 50 ms until the returned function is called; that function reads
// once more, fills each part's scores and records, and returns the first
// error.
func observeRecords(ctx context.Context, c *redis.Client, parts []*loadPart) func() error {
	seen := make([]map[recordID]bool, len(parts))
	lags := make([]int64, len(parts))
	for i := range seen {
		seen[i] = map[recordID]bool{}
	}
	read := func() error {
		for i, p := range parts {
			zs, err := c.ZRangeWithScores(ctx, p.permits, 0, -1).Result()
			if err != nil {
				return err
			}
			now := time.Now().UnixMilli()
			for _, z := range zs {
				r := recordID{z.Member.(string), z.Score}
				if !seen[i][r] {
					lags[i] = max(lags[i], now-int64(z.Score))
				}
				seen[i][r] = true
			}
		}
		return nil
	}
	stop, done := make(chan struct{}), make(chan error, 1)
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			if err := read(); err != nil {
				done <- err
				return
			}
			select {
			case <-stop:
				done <- read()
				return
			case <-tick.C:
			}
		}
	}()
	return func() error {
		close(stop)
		err := <-done
		for i, p := range parts {
			p.scores, p.records, p.lag = permitScores(seen[i]), len(seen[i]), lags[i]
		}
		return err
	}
}

// recordID names a permit record an observer saw: its member and its
// score. The score is part of its identity because Redisson 3.16.3's
// random part is a random int64 rounded to float32 (about 2^26 values),
// so two of its records in a run can share a member: two of a thousand
// in about 1% of runs (1,000^2 / 2^27).
type recordID struct {
	member string
	score  float64
}

// permitScores returns one score per permit the records hold (a record's
// last four bytes are its permits, little-endian), sorted.
func permitScores(records map[recordID]bool) []int64 {
	var scores []int64
	for r := range records {
		for n := binary.LittleEndian.Uint32([]byte(r.member[len(r.member)-4:])); n > 0; n-- {
			scores = append(scores, int64(r.score))
		}
	}
	sort.Slice(scores, func(i, j int) bool { return scores[i] < scores[j] })
	return scores
}

// checkPart checks one part after the run: its records hold every grant
// on it, no window holds more than its rate, the rate was reached, every
// side got permits.
func checkPart(t *testing.T, v, mode string, p *loadPart, composite int, start time.Time, dur time.Duration) {
	t.Helper()
	iv := p.cfg.Interval.Milliseconds()
	within := 0
	for _, s := range p.scores {
		if s >= start.UnixMilli() && s < start.Add(dur).UnixMilli() {
			within++
		}
	}
	capacity := int(p.cfg.Rate * dur.Milliseconds() / iv)
	worst, at := redistest.WorstWindow(p.scores, iv)
	tol, atTol := redistest.WorstWindow(p.scores, iv-stampTolerance)
	granted := p.java + p.gone + composite
	t.Logf("Redisson %s, %s, part %s (%d per %v): granted %d (composite %d, go single %d, java %d), %d permits in %d records, %d within the run (rate x duration %d); worst %dms window %d (at +%dms), worst %dms window %d; records first seen up to %dms after their score",
		v, mode, p.name, p.cfg.Rate, p.cfg.Interval, granted, composite, p.gone, p.java, len(p.scores), p.records, within, capacity,
		iv, worst, at-start.UnixMilli(), iv-stampTolerance, tol, p.lag)
	if len(p.scores) != granted {
		t.Errorf("%s: %d grants reported but its records hold %d permits", p.name, granted, len(p.scores))
	}
	if tol > int(p.cfg.Rate) {
		t.Errorf("%s: %d permits scored within %dms (at +%dms), rate %d per %v", p.name, tol, iv-stampTolerance, atTol-start.UnixMilli(), p.cfg.Rate, p.cfg.Interval)
	}
	floor := cmp.Or(p.floor, 90)
	if within*100 < capacity*floor {
		t.Errorf("%s: %d permits granted within %v, less than %d%% of %d", p.name, within, dur, floor, capacity)
	}
	if (composite == 0 && !p.mayStarve) || p.gone == 0 || p.java == 0 {
		t.Errorf("%s: a side got nothing: composite %d, go single %d, java %d", p.name, composite, p.gone, p.java)
	}
}
