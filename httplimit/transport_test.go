package httplimit_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/httplimit"
	"github.com/goredisson/ratelimiter/internal/redistest"
)

// arrivals is a handler that records when each request arrived, and when
// it was handed to the network (the X-Sent header of stamping).
type arrivals struct {
	mu       sync.Mutex
	at, sent []time.Time
}

func (a *arrivals) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	if r.URL.Path == "/warm" {
		return
	}
	sent, _ := time.Parse(time.RFC3339Nano, r.Header.Get("X-Sent"))
	a.mu.Lock()
	a.at = append(a.at, now)
	a.sent = append(a.sent, sent)
	a.mu.Unlock()
}

// delaySpread returns the longest minus the shortest time from sending to
// arrival.
func (a *arrivals) delaySpread() time.Duration {
	lo, hi := time.Duration(1<<62), time.Duration(0)
	for i := range a.at {
		d := a.at[i].Sub(a.sent[i])
		lo, hi = min(lo, d), max(hi, d)
	}
	return hi - lo
}

// stamping is the base of the Transports under test: it puts the time a
// request is handed to the network, after its permits, in X-Sent.
type stamping struct{ base http.RoundTripper }

func (s stamping) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("X-Sent", time.Now().Format(time.RFC3339Nano))
	return s.base.RoundTrip(req)
}

// Four processes' worth of Transports (each its own Redis connection
// and ratelimiter.Client), five goroutines each, send as fast as they can
// for 2.5 s to a server that allows 20 requests per sliding second,
// through one limiter of 20 per 1.05 s: the server never counts more than
// 20 arrivals in any 1 s window, and it gets at least two windows' worth.
//
// The 50 ms margin covers the spread of the delay from a grant's clock
// reading to the request's arrival (the script call's reply, scheduling,
// the HTTP send): measured up to 35 ms on a loaded 2-core machine under
// -race. With a limiter of exactly 20 per 1 s the server counted up to
// 40 in one second when one batch's reply came late and the next on
// time.
func TestTransportHoldsLimitAtReceiver(t *testing.T) {
	const rate, interval, margin = 20, time.Second, 50 * time.Millisecond
	recv := &arrivals{}
	srv := serve(t, recv)
	name := prefix(t) + "remote-api"
	var sent, limited atomic.Int64
	stop := time.Now().Add(2500 * time.Millisecond)
	var wg sync.WaitGroup
	for range 4 {
		rdb := newRedis(t)
		base := &http.Transport{MaxIdleConnsPerHost: 5}
		t.Cleanup(base.CloseIdleConnections)
		tr := &httplimit.Transport{
			Base:    stamping{base},
			Limiter: ratelimiter.NewClient(rdb).Limiter(name),
			Config:  ratelimiter.Config{Rate: rate, Interval: interval + margin},
		}
		hc := &http.Client{Transport: tr}
		var warm sync.WaitGroup
		for range 5 {
			warm.Add(1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Connections of its own first, outside the limit: dialing
				// would delay the first limited request by up to 150 ms.
				resp, err := (&http.Client{Transport: base}).Get(srv.URL + "/warm")
				if err == nil {
					resp.Body.Close()
				}
				rdb.Ping(context.Background()) // and a Redis connection
				warm.Done()
				warm.Wait()
				for time.Now().Before(stop) {
					ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
					resp, err := hc.Do(req)
					cancel()
					switch {
					case err == nil:
						resp.Body.Close()
						sent.Add(1)
					case errors.Is(err, httplimit.ErrLimited):
						limited.Add(1)
					default:
						t.Error(err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	recv.mu.Lock()
	defer recv.mu.Unlock()
	assert.Equal(t, sent.Load(), int64(len(recv.at)))
	assert.GreaterOrEqual(t, len(recv.at), 2*rate)
	assert.LessOrEqual(t, redistest.MostInWindow(recv.at, interval), rate, "arrivals in one sliding window")
	t.Logf("%d sent, %d limited; at most %d arrivals in a 1 s window; send-to-arrival delays spread over %v",
		sent.Load(), limited.Load(), redistest.MostInWindow(recv.at, interval), recv.delaySpread())
}

// A request whose permits cannot come in time fails at once with
// ErrLimited, before its deadline and without reaching the server: with
// MaxWait below the hint, and with a deadline below it.
func TestTransportFailsFast(t *testing.T) {
	recv := &arrivals{}
	srv := serve(t, recv)
	rdb := newRedis(t)
	lim := ratelimiter.NewClient(rdb).Limiter(prefix(t) + "api")
	require.NoError(t, lim.SetRate(context.Background(), ratelimiter.Config{Rate: 1, Interval: time.Minute}))
	require.NoError(t, lim.Acquire(context.Background(), 1))
	for name, tr := range map[string]*httplimit.Transport{
		"bound":    {Limiter: lim, MaxWait: 50 * time.Millisecond},
		"deadline": {Limiter: lim},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
			_, err := (&http.Client{Transport: tr}).Do(req)
			require.ErrorIs(t, err, httplimit.ErrLimited)
			assert.NoError(t, ctx.Err(), "failed before the deadline")
		})
	}
	recv.mu.Lock()
	defer recv.mu.Unlock()
	assert.Empty(t, recv.at)
}

// Redis gone: FailOpen sends the request unmetered, FailClosed returns
// the error; both report it. A Transport without a Limiter fails with
// ErrInvalidOption.
func TestTransportRedisDown(t *testing.T) {
	recv := &arrivals{}
	srv := serve(t, recv)
	rdb := redis.NewClient(&redis.Options{Addr: deadPort(t), MaxRetries: -1})
	defer rdb.Close()
	lim := ratelimiter.NewClient(rdb).Limiter("api")
	var hooked atomic.Int64
	onErr := func(*http.Request, error) { hooked.Add(1) }
	open := &http.Client{Transport: &httplimit.Transport{Limiter: lim, OnError: onErr}}
	closed := &http.Client{Transport: &httplimit.Transport{Limiter: lim, OnError: onErr, FailureMode: httplimit.FailClosed}}

	resp, err := open.Get(srv.URL)
	require.NoError(t, err)
	resp.Body.Close()
	_, err = closed.Get(srv.URL)
	require.Error(t, err)
	assert.NotErrorIs(t, err, httplimit.ErrLimited)
	assert.Equal(t, int64(2), hooked.Load())
	_, err = (&http.Client{Transport: &httplimit.Transport{}}).Get(srv.URL)
	assert.ErrorIs(t, err, httplimit.ErrInvalidOption)
	recv.mu.Lock()
	defer recv.mu.Unlock()
	assert.Len(t, recv.at, 1, "only the fail-open request arrived")
}
