package compat

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ratelimiter "github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/httplimit"
	"github.com/goredisson/ratelimiter/internal/redistest"
)

// TestOutgoingGoAndJava: a fleet of Go and Java callers holds a remote
// API's limit, measured at the receiving server. Two Go processes' worth
// of httplimit.Transport (2 goroutines each, each sending at most
// every 100 ms: 40 requests/s) and two Java Redisson 4.7.0
// clients (each calling acquire, then sending as fast as it can) share one
// limiter of 20 per 1.1 s and call a real local HTTP server for 3 s: the
// server never counts more than 20 arrivals in any 1 s window, and both
// languages get a share. The margin over the server's window covers the
// spread of the delay from a grant's clock reading to the request's
// arrival: 50 ms for Go alone (httplimit's test); a Java grant reaches the
// sender through the peer's stdout and this test, and windows 1 s long
// needed up to 30 ms more in 3 runs, hence 100 ms here.
func TestOutgoingGoAndJava(t *testing.T) {
	const rate, window, margin = 20, time.Second, 100 * time.Millisecond
	javas := []*Peer{newPeer(t, Versions[0], ""), newPeer(t, Versions[0], "")}
	name := redistest.Name(t)
	ctx := context.Background()
	setup := ratelimiter.NewClient(rdb(t)).Limiter(name)
	if err := setup.SetRate(ctx, ratelimiter.Config{Rate: rate, Interval: window + margin}); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var at []time.Time
	bySide := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		mu.Lock()
		at = append(at, now)
		bySide[r.Header.Get("X-Side")]++
		mu.Unlock()
	}))
	defer srv.Close()
	send := func(c *http.Client, side string) error {
		req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
		if err != nil {
			return err
		}
		req.Header.Set("X-Side", side)
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}

	var failed atomic.Int64
	var wg, warm sync.WaitGroup
	var stop time.Time
	start := make(chan struct{})
	// pace, when not 0, spaces a caller's requests: Go's waiters are woken
	// on time by their lane's timer and, unpaced, would take every permit
	// before Redisson's acquire retries.
	run := func(side string, take func() error, c *http.Client, pace time.Duration, warmUp func()) {
		wg.Add(1)
		warm.Add(1)
		go func() {
			defer wg.Done()
			warmUp()
			warm.Done()
			<-start
			var tick <-chan time.Time
			if pace > 0 {
				tk := time.NewTicker(pace)
				defer tk.Stop()
				tick = tk.C
			}
			for time.Now().Before(stop) {
				if tick != nil {
					<-tick
				}
				if err := take(); err != nil {
					t.Error(side, err)
					failed.Add(1)
					return
				}
				if err := send(c, side); err != nil {
					t.Error(side, err)
					return
				}
			}
		}()
	}
	for range 2 {
		redis := rdb(t)
		base := &http.Transport{MaxIdleConnsPerHost: 2}
		defer base.CloseIdleConnections()
		c := &http.Client{Transport: &httplimit.Transport{Base: base, Limiter: ratelimiter.NewClient(redis).Limiter(name)}}
		for range 2 {
			run("go", func() error { return nil }, c, 100*time.Millisecond, func() {
				redis.Ping(ctx)                                 // connections of its own first: dialing
				_ = send(&http.Client{Transport: base}, "warm") // would delay a grant's request
			})
		}
	}
	for _, j := range javas {
		base := &http.Transport{MaxIdleConnsPerHost: 1}
		defer base.CloseIdleConnections()
		c := &http.Client{Transport: base}
		acquire := func() error {
			actx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			return javaSide{j}.acquire(actx, name, 1)
		}
		run("java", acquire, c, 0, func() { _ = send(c, "warm") })
	}
	warm.Wait()
	mu.Lock()
	at, bySide = nil, map[string]int{}
	mu.Unlock()
	stop = time.Now().Add(3 * time.Second)
	close(start)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	most := redistest.MostInWindow(at, window)
	t.Logf("arrivals: %v; at most %d in a %v window", bySide, most, window)
	if most > rate {
		t.Errorf("%d arrivals in one %v window, limit %d", most, window, rate)
	}
	if bySide["go"] < rate/2 || bySide["java"] < rate/2 {
		t.Errorf("both languages must get a share: %v", bySide)
	}
	if len(at) < 2*rate {
		t.Errorf("%d arrivals in 3 s, want at least %d", len(at), 2*rate)
	}
}
