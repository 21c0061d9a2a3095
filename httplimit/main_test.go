package httplimit_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter/internal/redistest"
)

// redisAddr is the real redis-server that the tests and examples share;
// each test uses a prefix of its own.
var redisAddr string

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{}) // the failure tests dial dead ports on purpose
	os.Exit(redistest.Main(m, &redisAddr, nil))
}

func newRedis(t testing.TB) *redis.Client { return redistest.Client(t, redisAddr) }

var seq atomic.Int64

// prefix gives each test its own limiter names on the shared server.
func prefix(t testing.TB) string {
	return fmt.Sprintf("t%d-%s:", seq.Add(1), strings.ReplaceAll(t.Name(), "/", "-"))
}

// counting is a handler that counts the requests that reach it.
type counting struct{ n atomic.Int64 }

func (c *counting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.n.Add(1)
	fmt.Fprint(w, "ok")
}

// get sends one real HTTP request with optional headers ("Name", "value", ...).
func get(t testing.TB, url string, hdr ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func serve(t testing.TB, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}
