package httplimit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
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
	"github.com/goredisson/ratelimiter/wire"
)

// Rate 3 per 10s: three requests pass with the RateLimit fields counting
// down, the fourth gets 429 with Retry-After, and Redis holds exactly the
// three permit records of the granted requests under the IP's limiter.
func TestGrantsThenRefusesWithHeaders(t *testing.T) {
	rdb := newRedis(t)
	p := prefix(t)
	lim, err := httplimit.New(rdb, ratelimiter.Config{Rate: 3, Interval: 10 * time.Second}, httplimit.WithPrefix(p))
	require.NoError(t, err)
	h := &counting{}
	srv := serve(t, lim.Handler(h))

	for i, want := range []string{"2", "1", "0"} {
		resp := get(t, srv.URL)
		require.Equal(t, http.StatusOK, resp.StatusCode, "request %d", i)
		assert.Equal(t, `"default";q=3;w=10`, resp.Header.Get("RateLimit-Policy"))
		rl := resp.Header.Get("RateLimit")
		assert.Regexp(t, `^"default";r=`+want+`;t=(8|9|10)$`, rl, "request %d", i)
		assert.Empty(t, resp.Header.Get("Retry-After"))
	}
	resp := get(t, srv.URL)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	ra, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	require.NoError(t, err, "Retry-After %q", resp.Header.Get("Retry-After"))
	assert.True(t, ra >= 1 && ra <= 11, "Retry-After %d", ra)
	assert.Equal(t, fmt.Sprintf(`"default";r=0;t=%d`, ra), resp.Header.Get("RateLimit"))
	assert.Equal(t, `"default";q=3;w=10`, resp.Header.Get("RateLimit-Policy"))
	assert.Equal(t, int64(3), h.n.Load(), "the refused request must not reach the handler")

	// What Redis holds: the config the middleware set up and three records.
	rl := lim.Client().Limiter(p + "ip:127.0.0.1")
	cfg, err := rl.Config(context.Background())
	require.NoError(t, err)
	assert.Equal(t, ratelimiter.Config{Rate: 3, Interval: 10 * time.Second}, cfg)
	n, err := rdb.ZCard(context.Background(), wire.KeysFor(rl.Name(), "").Permits).Result()
	require.NoError(t, err)
	assert.Equal(t, int64(3), n)
	v, err := rdb.Get(context.Background(), wire.KeysFor(rl.Name(), "").Value).Result()
	require.NoError(t, err)
	assert.Equal(t, "0", v)
}

// Many clients at once on one limiter: exactly Rate requests pass, the
// rest are refused, and the handler runs exactly Rate times.
func TestConcurrentClients(t *testing.T) {
	rdb := newRedis(t)
	lim, err := httplimit.New(rdb, ratelimiter.Config{Rate: 20, Interval: time.Minute},
		httplimit.WithPrefix(prefix(t)), httplimit.WithKey(httplimit.KeyByHeader("X-API-Key")))
	require.NoError(t, err)
	h := &counting{}
	srv := serve(t, lim.Handler(h))

	const clients = 60
	var wg sync.WaitGroup
	codes := make([]int, clients)
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
			req.Header.Set("X-API-Key", "shared")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				codes[i] = -1
				return
			}
			resp.Body.Close()
			codes[i] = resp.StatusCode
		}()
	}
	wg.Wait()
	count := map[int]int{}
	for _, c := range codes {
		count[c]++
	}
	assert.Equal(t, map[int]int{200: 20, 429: 40}, count)
	assert.Equal(t, int64(20), h.n.Load())
}

// Keys separate budgets: exhausting one API key leaves another untouched;
// a request without the key gets 400 and the hook sees ErrNoKey; KeyFirst
// falls back to the IP.
func TestKeys(t *testing.T) {
	rdb := newRedis(t)
	p := prefix(t)
	var hookErr error
	var mu sync.Mutex
	lim, err := httplimit.New(rdb, ratelimiter.Config{Rate: 1, Interval: time.Minute},
		httplimit.WithPrefix(p), httplimit.WithKey(httplimit.KeyByHeader("x-api-key")),
		httplimit.WithErrorHook(func(r *http.Request, err error) { mu.Lock(); hookErr = err; mu.Unlock() }))
	require.NoError(t, err)
	srv := serve(t, lim.Handler(&counting{}))

	assert.Equal(t, 200, get(t, srv.URL, "X-API-Key", "alice").StatusCode)
	assert.Equal(t, 429, get(t, srv.URL, "X-API-Key", "alice").StatusCode)
	assert.Equal(t, 200, get(t, srv.URL, "X-API-Key", "bob").StatusCode)
	assert.Equal(t, 400, get(t, srv.URL).StatusCode)
	mu.Lock()
	assert.ErrorIs(t, hookErr, httplimit.ErrNoKey)
	mu.Unlock()
	for _, who := range []string{"alice", "bob"} {
		n, err := rdb.Exists(context.Background(), p+"X-Api-Key:"+who).Result()
		require.NoError(t, err)
		assert.Equal(t, int64(1), n, who)
	}

	fallback, err := httplimit.New(rdb, ratelimiter.Config{Rate: 1, Interval: time.Minute},
		httplimit.WithPrefix(p+"fb:"), httplimit.WithKey(httplimit.KeyFirst(httplimit.KeyByHeader("X-API-Key"), httplimit.KeyByIP)))
	require.NoError(t, err)
	srv2 := serve(t, fallback.Handler(&counting{}))
	assert.Equal(t, 200, get(t, srv2.URL).StatusCode)
	assert.Equal(t, 429, get(t, srv2.URL).StatusCode)
	n, err := rdb.Exists(context.Background(), p+"fb:ip:127.0.0.1").Result()
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)
}

// A key a client controls cannot pick a name with '{' (which would break
// cluster slots) or of any length: such keys are hashed.
func TestUnsafeKeysAreHashed(t *testing.T) {
	rdb := newRedis(t)
	p := prefix(t)
	lim, err := httplimit.New(rdb, ratelimiter.Config{Rate: 1, Interval: time.Minute},
		httplimit.WithPrefix(p), httplimit.WithKey(httplimit.KeyByHeader("X-API-Key")))
	require.NoError(t, err)
	srv := serve(t, lim.Handler(&counting{}))
	evil := "a{b"
	assert.Equal(t, 200, get(t, srv.URL, "X-API-Key", evil).StatusCode)
	assert.Equal(t, 429, get(t, srv.URL, "X-API-Key", evil).StatusCode)
	name := lim.Name("X-Api-Key:" + evil)
	assert.Regexp(t, `^`+p+`sha256:[0-9a-f]{64}$`, name)
	n, err := rdb.Exists(context.Background(), name).Result()
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)
}

// A limiter that exists already keeps its configuration (an operator set
// rate 1); the headers report the real rate, not the middleware's Config.
func TestExistingConfigWins(t *testing.T) {
	rdb := newRedis(t)
	p := prefix(t)
	lim, err := httplimit.New(rdb, ratelimiter.Config{Rate: 100, Interval: time.Minute}, httplimit.WithPrefix(p))
	require.NoError(t, err)
	require.NoError(t, lim.Client().Limiter(p+"ip:127.0.0.1").SetRate(context.Background(),
		ratelimiter.Config{Rate: 1, Interval: 30 * time.Second}))
	srv := serve(t, lim.Handler(&counting{}))
	resp := get(t, srv.URL)
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, `"default";q=1;w=30`, resp.Header.Get("RateLimit-Policy"))
	assert.Equal(t, 429, get(t, srv.URL).StatusCode)
}

// Deleting a limiter behind the middleware's back (its config is cached
// as set up) does not break it: ErrNotInitialized makes it configure the
// limiter again.
func TestReconfiguresAfterDelete(t *testing.T) {
	rdb := newRedis(t)
	p := prefix(t)
	lim, err := httplimit.New(rdb, ratelimiter.Config{Rate: 5, Interval: time.Minute}, httplimit.WithPrefix(p))
	require.NoError(t, err)
	srv := serve(t, lim.Handler(&counting{}))
	require.Equal(t, 200, get(t, srv.URL).StatusCode)
	rl := lim.Client().Limiter(p + "ip:127.0.0.1")
	deleted, err := rl.Delete(context.Background())
	require.NoError(t, err)
	require.True(t, deleted)

	resp := get(t, srv.URL)
	assert.Equal(t, 200, resp.StatusCode)
	assert.Regexp(t, `^"default";r=4;t=(59|60)$`, resp.Header.Get("RateLimit"))
	cfg, err := rl.Config(context.Background())
	require.NoError(t, err)
	assert.Equal(t, int64(5), cfg.Rate)
}

// Permits per request: rate 10 at 4 permits a request is 2 requests; the
// headers count requests.
func TestPermitsPerRequest(t *testing.T) {
	rdb := newRedis(t)
	p := prefix(t)
	lim, err := httplimit.New(rdb, ratelimiter.Config{Rate: 10, Interval: 2 * time.Second},
		httplimit.WithPrefix(p), httplimit.WithPermits(4))
	require.NoError(t, err)
	srv := serve(t, lim.Handler(&counting{}))
	resp := get(t, srv.URL)
	require.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, `"default";q=2;w=2`, resp.Header.Get("RateLimit-Policy"))
	assert.Regexp(t, `^"default";r=1;t=[12]$`, resp.Header.Get("RateLimit"))
	require.Equal(t, 200, get(t, srv.URL).StatusCode)
	require.Equal(t, 429, get(t, srv.URL).StatusCode)
	v, err := rdb.Get(context.Background(), "{"+p+"ip:127.0.0.1}:value").Result()
	require.NoError(t, err)
	assert.Equal(t, "2", v)
}

// WithWait: a request that finds the limiter empty waits for the permit
// instead of failing. The two permit records prove the second grant came
// only after the first left the window.
func TestWaitGrantsWithinBound(t *testing.T) {
	rdb := newRedis(t)
	p := prefix(t)
	lim, err := httplimit.New(rdb, ratelimiter.Config{Rate: 1, Interval: 200 * time.Millisecond},
		httplimit.WithPrefix(p), httplimit.WithWait(10*time.Second))
	require.NoError(t, err)
	var waited []time.Duration
	var mu sync.Mutex
	srv := serve(t, lim.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, ok := httplimit.FromContext(r.Context())
		mu.Lock()
		waited = append(waited, d.Waited)
		mu.Unlock()
		assert.True(t, ok && d.Granted)
	})))
	permits := "{" + p + "ip:127.0.0.1}:permits"
	require.Equal(t, 200, get(t, srv.URL).StatusCode)
	first, err := rdb.ZRangeWithScores(context.Background(), permits, 0, -1).Result()
	require.NoError(t, err)
	require.Len(t, first, 1)
	require.Equal(t, 200, get(t, srv.URL).StatusCode)
	// The second grant released the first record and stamped its own at
	// least one interval later.
	second, err := rdb.ZRangeWithScores(context.Background(), permits, 0, -1).Result()
	require.NoError(t, err)
	require.Len(t, second, 1)
	assert.NotEqual(t, first[0].Member, second[0].Member)
	assert.GreaterOrEqual(t, second[0].Score-first[0].Score, 200.0, "second grant inside the first's window")
	require.Len(t, waited, 2)
	assert.Positive(t, waited[1])
}

// WithWait with a bound shorter than the hint refuses at once, with the
// hint as Retry-After.
func TestWaitBoundTooShortRefuses(t *testing.T) {
	rdb := newRedis(t)
	lim, err := httplimit.New(rdb, ratelimiter.Config{Rate: 1, Interval: time.Minute},
		httplimit.WithPrefix(prefix(t)), httplimit.WithWait(50*time.Millisecond))
	require.NoError(t, err)
	h := &counting{}
	srv := serve(t, lim.Handler(h))
	require.Equal(t, 200, get(t, srv.URL).StatusCode)
	resp := get(t, srv.URL)
	require.Equal(t, 429, resp.StatusCode)
	ra, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	require.NoError(t, err)
	assert.True(t, ra >= 58 && ra <= 61, "Retry-After %d", ra)
	assert.Equal(t, int64(1), h.n.Load())
}

// A custom refusal handler gets the Decision and the headers already set.
func TestRefusalHandler(t *testing.T) {
	rdb := newRedis(t)
	p := prefix(t)
	lim, err := httplimit.New(rdb, ratelimiter.Config{Rate: 1, Interval: time.Minute},
		httplimit.WithPrefix(p), httplimit.WithPolicyName("per-ip"),
		httplimit.WithRefusalHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			d, _ := httplimit.FromContext(r.Context())
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusTooManyRequests)
			_ = json.NewEncoder(w).Encode(map[string]any{
				"type":              "https://iana.org/assignments/http-problem-types#quota-exceeded",
				"violated-policies": []string{"per-ip"},
				"limiter":           d.Name,
				"retry-after-ms":    d.RetryAfter.Milliseconds(),
			})
		})))
	require.NoError(t, err)
	srv := serve(t, lim.Handler(&counting{}))
	require.Equal(t, 200, get(t, srv.URL).StatusCode)
	resp, err := http.Get(srv.URL)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, 429, resp.StatusCode)
	assert.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
	assert.NotEmpty(t, resp.Header.Get("Retry-After"))
	assert.Regexp(t, `^"per-ip";r=0;t=\d+$`, resp.Header.Get("RateLimit"))
	var body map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	assert.Equal(t, p+"ip:127.0.0.1", body["limiter"])
	assert.Greater(t, body["retry-after-ms"], 0.0)
}

// Fail open and fail closed, with Redis really gone: a server that was
// closed, and a port nothing listens on.
func TestRedisFailure(t *testing.T) {
	redistest.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	own, err := redistest.StartWrapped(ctx, nil) // its own, even with REDIS_ADDR set: it closes it
	require.NoError(t, err)
	addr := own.Addr()
	require.NoError(t, own.Close())
	port, err := redistest.FreePort()
	require.NoError(t, err)
	dead := fmt.Sprintf("127.0.0.1:%d", port)

	for _, target := range []struct{ name, addr string }{{"closed server", addr}, {"dead port", dead}} {
		for _, mode := range []httplimit.FailureMode{httplimit.FailOpen, httplimit.FailClosed} {
			t.Run(fmt.Sprintf("%s/mode%d", target.name, mode), func(t *testing.T) {
				rdb := redis.NewClient(&redis.Options{Addr: target.addr, MaxRetries: -1,
					DialTimeout: time.Second, DialerRetries: 1, DialerRetryTimeout: time.Millisecond})
				defer rdb.Close()
				var hooked []error
				var mu sync.Mutex
				lim, err := httplimit.New(rdb, ratelimiter.Config{Rate: 1, Interval: time.Minute},
					httplimit.WithFailureMode(mode),
					httplimit.WithErrorHook(func(r *http.Request, err error) { mu.Lock(); hooked = append(hooked, err); mu.Unlock() }))
				require.NoError(t, err)
				h := &counting{}
				srv := serve(t, lim.Handler(h))
				for i := 0; i < 3; i++ {
					resp := get(t, srv.URL)
					if mode == httplimit.FailOpen {
						assert.Equal(t, 200, resp.StatusCode)
					} else {
						assert.Equal(t, 503, resp.StatusCode)
					}
					assert.Empty(t, resp.Header.Get("RateLimit"))
				}
				if mode == httplimit.FailOpen {
					assert.Equal(t, int64(3), h.n.Load(), "fail open serves every request")
				} else {
					assert.Equal(t, int64(0), h.n.Load(), "fail closed serves none")
				}
				mu.Lock()
				defer mu.Unlock()
				require.Len(t, hooked, 3)
				for _, e := range hooked {
					assert.False(t, errors.Is(e, ratelimiter.ErrInvalidArgument), "%v", e)
				}
			})
		}
	}
}

// Bad configuration is refused by New with a typed error, before Redis.
func TestNewRejectsBadInput(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never contacted
	defer rdb.Close()
	good := ratelimiter.Config{Rate: 5, Interval: time.Second}
	cases := map[string]struct {
		rdb  redis.UniversalClient
		cfg  ratelimiter.Config
		opts []httplimit.Option
	}{
		"nil redis":        {nil, good, nil},
		"zero rate":        {rdb, ratelimiter.Config{Interval: time.Second}, nil},
		"sub-ms interval":  {rdb, ratelimiter.Config{Rate: 1, Interval: time.Microsecond}, nil},
		"short keep-alive": {rdb, ratelimiter.Config{Rate: 1, Interval: time.Second, KeepAlive: time.Millisecond}, nil},
		"bad mode":         {rdb, ratelimiter.Config{Mode: 7, Rate: 1, Interval: time.Second}, nil},
		"permits > rate":   {rdb, good, []httplimit.Option{httplimit.WithPermits(6)}},
		"zero permits":     {rdb, good, []httplimit.Option{httplimit.WithPermits(0)}},
		"negative wait":    {rdb, good, []httplimit.Option{httplimit.WithWait(-time.Second)}},
		"nil key":          {rdb, good, []httplimit.Option{httplimit.WithKey(nil)}},
		"brace prefix":     {rdb, good, []httplimit.Option{httplimit.WithPrefix("a{b}:")}},
		"bad policy":       {rdb, good, []httplimit.Option{httplimit.WithPolicyName(`a"b`)}},
		"nil refusal":      {rdb, good, []httplimit.Option{httplimit.WithRefusalHandler(nil)}},
		"bad failure mode": {rdb, good, []httplimit.Option{httplimit.WithFailureMode(9)}},
		"nil option":       {rdb, good, []httplimit.Option{nil}},
		"empty client id":  {rdb, good, []httplimit.Option{httplimit.WithClientOptions(ratelimiter.WithClientID(""))}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			lim, err := httplimit.New(c.rdb, c.cfg, c.opts...)
			assert.Nil(t, lim)
			assert.ErrorIs(t, err, httplimit.ErrInvalidOption)
			assert.ErrorIs(t, err, ratelimiter.ErrInvalidArgument)
		})
	}
}

// The RateLimit t parameter counts down to the oldest record's expiry,
// and the w parameter is left out for a sub-second interval.
func TestHeadersSubSecondInterval(t *testing.T) {
	rdb := newRedis(t)
	lim, err := httplimit.New(rdb, ratelimiter.Config{Rate: 2, Interval: 1500 * time.Millisecond},
		httplimit.WithPrefix(prefix(t)))
	require.NoError(t, err)
	srv := serve(t, lim.Handler(&counting{}))
	resp := get(t, srv.URL)
	assert.Equal(t, `"default";q=2`, resp.Header.Get("RateLimit-Policy"))
	assert.Regexp(t, `^"default";r=1;t=[12]$`, resp.Header.Get("RateLimit"))
}

// WithoutHeaders sends no RateLimit fields, but still Retry-After.
func TestWithoutHeaders(t *testing.T) {
	rdb := newRedis(t)
	lim, err := httplimit.New(rdb, ratelimiter.Config{Rate: 1, Interval: time.Minute},
		httplimit.WithPrefix(prefix(t)), httplimit.WithoutHeaders())
	require.NoError(t, err)
	srv := serve(t, lim.Handler(&counting{}))
	resp := get(t, srv.URL)
	assert.Equal(t, 200, resp.StatusCode)
	assert.Empty(t, resp.Header.Get("RateLimit"))
	assert.Empty(t, resp.Header.Get("RateLimit-Policy"))
	resp = get(t, srv.URL)
	assert.Equal(t, 429, resp.StatusCode)
	assert.NotEmpty(t, resp.Header.Get("Retry-After"))
	assert.Empty(t, resp.Header.Get("RateLimit"))
}

// PER_CLIENT limiters: each middleware instance (client id) has its own
// budget, and the headers read this client's value key.
func TestPerClientMode(t *testing.T) {
	rdb := newRedis(t)
	p := prefix(t)
	cfg := ratelimiter.Config{Mode: ratelimiter.PerClient, Rate: 1, Interval: time.Minute}
	a, err := httplimit.New(rdb, cfg, httplimit.WithPrefix(p), httplimit.WithClientOptions(ratelimiter.WithClientID("node-a")))
	require.NoError(t, err)
	b, err := httplimit.New(rdb, cfg, httplimit.WithPrefix(p), httplimit.WithClientOptions(ratelimiter.WithClientID("node-b")))
	require.NoError(t, err)
	sa, sb := serve(t, a.Handler(&counting{})), serve(t, b.Handler(&counting{}))
	resp := get(t, sa.URL)
	assert.Equal(t, 200, resp.StatusCode)
	assert.Regexp(t, `^"default";r=0;t=(59|60)$`, resp.Header.Get("RateLimit"))
	assert.Equal(t, 429, get(t, sa.URL).StatusCode)
	assert.Equal(t, 200, get(t, sb.URL).StatusCode)
	for _, id := range []string{"node-a", "node-b"} {
		n, err := rdb.ZCard(context.Background(), "{"+p+"ip:127.0.0.1}:permits:"+id).Result()
		require.NoError(t, err)
		assert.Equal(t, int64(1), n, id)
	}
}

// KeyByRoute shares one limiter per ServeMux pattern among all clients
// and all paths the pattern matches.
func TestKeyByRoute(t *testing.T) {
	rdb := newRedis(t)
	p := prefix(t)
	lim, err := httplimit.New(rdb, ratelimiter.Config{Rate: 2, Interval: time.Minute},
		httplimit.WithPrefix(p), httplimit.WithKey(httplimit.KeyByRoute()))
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("GET /items/{id}", lim.Handler(&counting{}))
	mux.Handle("GET /other", lim.Handler(&counting{}))
	srv := serve(t, mux)
	assert.Equal(t, 200, get(t, srv.URL+"/items/1").StatusCode)
	assert.Equal(t, 200, get(t, srv.URL+"/items/2").StatusCode)
	assert.Equal(t, 429, get(t, srv.URL+"/items/3").StatusCode)
	assert.Equal(t, 200, get(t, srv.URL+"/other").StatusCode)
	assert.Equal(t, "2", rdb.HGet(context.Background(), p+"route:GET /items/<id>", "rate").Val())
}

// A rate lowered below the permits a request takes refuses (429) even when
// failing open, and tells the hook why.
func TestRateBelowPermitsRefuses(t *testing.T) {
	rdb := newRedis(t)
	p := prefix(t)
	var hooked error
	var mu sync.Mutex
	lim, err := httplimit.New(rdb, ratelimiter.Config{Rate: 5, Interval: 3 * time.Second},
		httplimit.WithPrefix(p), httplimit.WithPermits(3),
		httplimit.WithErrorHook(func(r *http.Request, err error) { mu.Lock(); hooked = err; mu.Unlock() }))
	require.NoError(t, err)
	require.NoError(t, lim.Client().Limiter(p+"ip:127.0.0.1").SetRate(context.Background(),
		ratelimiter.Config{Rate: 2, Interval: 3 * time.Second}))
	h := &counting{}
	srv := serve(t, lim.Handler(h))
	resp := get(t, srv.URL)
	assert.Equal(t, 429, resp.StatusCode)
	assert.Equal(t, "3", resp.Header.Get("Retry-After"))
	assert.Zero(t, h.n.Load())
	mu.Lock()
	assert.ErrorIs(t, hooked, ratelimiter.ErrPermitsExceedRate)
	mu.Unlock()
}

// Concurrent clients with WithWait all get through, each after waiting
// its turn; the handler runs once per request.
func TestWaitConcurrent(t *testing.T) {
	rdb := newRedis(t)
	lim, err := httplimit.New(rdb, ratelimiter.Config{Rate: 4, Interval: 100 * time.Millisecond},
		httplimit.WithPrefix(prefix(t)), httplimit.WithWait(20*time.Second))
	require.NoError(t, err)
	h := &counting{}
	srv := serve(t, lim.Handler(h))
	const clients = 12
	var wg sync.WaitGroup
	codes := make([]int, clients)
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Get(srv.URL)
			if err != nil {
				return
			}
			resp.Body.Close()
			codes[i] = resp.StatusCode
		}()
	}
	wg.Wait()
	for i, c := range codes {
		assert.Equal(t, 200, c, "client %d", i)
	}
	assert.Equal(t, int64(clients), h.n.Load())
}

// A client that gives up while its request waits for a permit (an hour
// away): the request ends without reaching the handler and without an
// error report.
func TestWaitClientGone(t *testing.T) {
	rdb := newRedis(t)
	var hooked atomic.Int64
	lim, err := httplimit.New(rdb, ratelimiter.Config{Rate: 1, Interval: time.Hour},
		httplimit.WithPrefix(prefix(t)), httplimit.WithWait(2*time.Hour),
		httplimit.WithErrorHook(func(*http.Request, error) { hooked.Add(1) }))
	require.NoError(t, err)
	h := &counting{}
	entered, done := make(chan struct{}, 2), make(chan struct{}, 2)
	srv := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		defer func() { done <- struct{}{} }()
		lim.Handler(h).ServeHTTP(w, r)
	}))
	require.Equal(t, 200, get(t, srv.URL).StatusCode)
	<-entered
	<-done

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	errc := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	select {
	case <-entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the second request never reached the server")
	}
	cancel() // hang up while the middleware acquires or waits
	require.Error(t, <-errc)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the waiting request did not end when its client went away")
	}
	assert.Equal(t, int64(1), h.n.Load(), "the handler ran only for the first request")
	assert.Zero(t, hooked.Load())
}

// TestDeadlineWhileRedisUnreachable is issue 14's sixth defect: when the
// request's deadline passed while Redis did not answer, the middleware
// returned without a word and net/http sent an empty 200. Fail open must
// run the handler; fail closed must answer 503.
func TestDeadlineWhileRedisUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() { // accepts and never answers
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	for _, mode := range []httplimit.FailureMode{httplimit.FailOpen, httplimit.FailClosed} {
		t.Run(fmt.Sprintf("mode%d", mode), func(t *testing.T) {
			rdb := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), MaxRetries: -1, ReadTimeout: time.Minute})
			defer rdb.Close()
			lim, err := httplimit.New(rdb, ratelimiter.Config{Rate: 1, Interval: time.Minute}, httplimit.WithFailureMode(mode))
			require.NoError(t, err)
			h := &counting{}
			deadline := func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					ctx, cancel := context.WithTimeout(r.Context(), 100*time.Millisecond)
					defer cancel()
					next.ServeHTTP(w, r.WithContext(ctx))
				})
			}
			srv := serve(t, deadline(lim.Handler(h)))
			resp := get(t, srv.URL)
			if mode == httplimit.FailOpen {
				assert.Equal(t, 200, resp.StatusCode)
				assert.Equal(t, int64(1), h.n.Load(), "the handler ran")
			} else {
				assert.Equal(t, 503, resp.StatusCode)
				assert.Equal(t, int64(0), h.n.Load())
			}
		})
	}
}
