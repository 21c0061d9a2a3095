package httplimit_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/httplimit"
)

var hello = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "hello") })

// examplePrefix gives every run of an example fresh limiter names (go
// test -count=N runs them again on the same server).
func examplePrefix(name string) string { return fmt.Sprintf("example-%s-%d:", name, seq.Add(1)) }

// Protect a handler: at most 2 requests per client IP per minute. The
// examples use redisAddr, the test server's host:port; use your Redis's.
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	lim, err := httplimit.New(rdb, ratelimiter.Config{Rate: 2, Interval: time.Minute},
		httplimit.WithPrefix(examplePrefix("new")))
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(lim.Handler(hello))
	defer srv.Close()

	for i := 0; i < 3; i++ {
		resp, err := http.Get(srv.URL)
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode, resp.Header.Get("RateLimit-Policy"), resp.Header.Get("Retry-After") != "")
	}
	// Output:
	// 200 "default";q=2;w=60 false
	// 200 "default";q=2;w=60 false
	// 429 "default";q=2;w=60 true
}

// Limit by API key, falling back to the client IP for requests without
// one.
func ExampleKeyFirst() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	lim, err := httplimit.New(rdb, ratelimiter.Config{Rate: 1, Interval: time.Minute},
		httplimit.WithPrefix(examplePrefix("key")),
		httplimit.WithKey(httplimit.KeyFirst(httplimit.KeyByHeader("X-API-Key"), httplimit.KeyByIP)))
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(lim.Handler(hello))
	defer srv.Close()

	for _, key := range []string{"alice", "alice", "bob", ""} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		if key != "" {
			req.Header.Set("X-API-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
		fmt.Printf("%q %d\n", key, resp.StatusCode)
	}
	// Output:
	// "alice" 200
	// "alice" 429
	// "bob" 200
	// "" 200
}

// Wait up to two seconds for a permit instead of refusing at once.
func ExampleWithWait() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	lim, err := httplimit.New(rdb, ratelimiter.Config{Rate: 1, Interval: 100 * time.Millisecond},
		httplimit.WithPrefix(examplePrefix("wait")), httplimit.WithWait(2*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(lim.Handler(hello))
	defer srv.Close()

	for i := 0; i < 2; i++ {
		resp, err := http.Get(srv.URL)
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode)
	}
	// Output:
	// 200
	// 200
}

// Fail closed: while Redis is unreachable every request gets 503 and the
// error hook sees why.
func ExampleWithFailClosed() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1})
	lim, err := httplimit.New(rdb, ratelimiter.Config{Rate: 10, Interval: time.Second},
		httplimit.WithFailClosed(),
		httplimit.WithErrorHook(func(r *http.Request, err error) { fmt.Println("rate limiter error") }))
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(lim.Handler(hello))
	defer srv.Close()

	resp, err := http.Get(srv.URL)
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode)
	// Output:
	// rate limiter error
	// 503
}

// A refusal handler that answers with an RFC 9457 problem document.
func ExampleWithRefusalHandler() {
	problem := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, _ := httplimit.FromContext(r.Context())
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprintf(w, `{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","violated-policies":["default"],"key":%q}`, d.Key)
	})
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	lim, err := httplimit.New(rdb, ratelimiter.Config{Rate: 1, Interval: time.Minute},
		httplimit.WithPrefix(examplePrefix("refusal")), httplimit.WithRefusalHandler(problem))
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(lim.Handler(hello))
	defer srv.Close()

	for i := 0; i < 2; i++ {
		resp, err := http.Get(srv.URL)
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	// Output:
	// 200 text/plain; charset=utf-8
	// 429 application/problem+json
}

// Hold outgoing requests to a remote API under its limit of 2 per minute,
// shared by every process that uses the same limiter; a request whose
// permit cannot come before its deadline fails at once with ErrLimited.
func ExampleTransport() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	remote := httptest.NewServer(hello) // stands for the remote API
	defer remote.Close()
	client := &http.Client{Transport: &httplimit.Transport{
		Limiter: ratelimiter.NewClient(rdb).Limiter(examplePrefix("remote") + "api"),
		Config:  ratelimiter.Config{Rate: 2, Interval: time.Minute},
		MaxWait: time.Second,
	}}

	for i := 0; i < 3; i++ {
		resp, err := client.Get(remote.URL)
		if err != nil {
			fmt.Println(errors.Is(err, httplimit.ErrLimited))
			continue
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode)
	}
	// Output:
	// 200
	// 200
	// true
}

// Shadow mode: see what a limit of 1 per minute would refuse, without
// refusing anything.
func ExampleWithShadow() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	lim, err := httplimit.New(rdb, ratelimiter.Config{Rate: 1, Interval: time.Minute},
		httplimit.WithPrefix(examplePrefix("shadow")), httplimit.WithShadow(),
		httplimit.WithDecisionHook(func(r *http.Request, d httplimit.Decision) {
			if !d.Granted {
				fmt.Println("would refuse", d.Key)
			}
		}))
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(lim.Handler(hello))
	defer srv.Close()

	for i := 0; i < 2; i++ {
		resp, err := http.Get(srv.URL)
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode)
	}
	// Output:
	// 200
	// would refuse ip:127.0.0.1
	// 200
}

// Two limits per client IP at once: 2 per minute and 100 per day. Each
// request takes a permit from both or from neither: the refused third
// request leaves the daily budget at 98. The headers describe the rule
// that binds.
func ExampleWithRules() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	prefix := examplePrefix("rules")
	lim, err := httplimit.New(rdb, ratelimiter.Config{}, httplimit.WithPrefix(prefix),
		httplimit.WithRules(
			httplimit.Rule{Name: "minute", Config: ratelimiter.Config{Rate: 2, Interval: time.Minute}},
			httplimit.Rule{Name: "day", Config: ratelimiter.Config{Rate: 100, Interval: 24 * time.Hour}}))
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(lim.Handler(hello))
	defer srv.Close()

	for i := 0; i < 3; i++ {
		resp, err := http.Get(srv.URL)
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode, resp.Header.Get("RateLimit-Policy"))
	}
	names := lim.Names("ip:127.0.0.1")
	left, err := lim.Client().Limiter(names[1]).AvailablePermits(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(strings.TrimPrefix(names[1], prefix), left)
	// Output:
	// 200 "minute";q=2;w=60, "day";q=100;w=86400
	// 200 "minute";q=2;w=60, "day";q=100;w=86400
	// 429 "minute";q=2;w=60, "day";q=100;w=86400
	// {ip:127.0.0.1}:day 98
}
