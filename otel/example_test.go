package ratelimiterotel_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/goredisson/ratelimiter"
	ratelimiterotel "github.com/goredisson/ratelimiter/otel"
)

// Export the metrics to Prometheus: the OTel Prometheus exporter is the
// reader of the MeterProvider, and promhttp serves its registry.
func Example_prometheus() {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		panic(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer mp.Shutdown(ctx)
	m, err := ratelimiterotel.New(ratelimiterotel.WithMeterProvider(mp))
	if err != nil {
		panic(err)
	}

	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	client := ratelimiter.NewClient(rdb, ratelimiter.WithHooks(m.Hooks()))
	api := client.Limiter("example-prometheus-api")
	_ = api.SetRate(ctx, ratelimiter.Config{Rate: 2, Interval: time.Minute})
	for i := 0; i < 3; i++ {
		_, _ = api.TryAcquire(ctx, 1)
	}

	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "ratelimiter_decisions_total") || strings.HasPrefix(line, "ratelimiter_permits_granted_total") {
			fmt.Println(line)
		}
	}
	// Output:
	// ratelimiter_decisions_total{ratelimiter_name="example-prometheus-api",ratelimiter_operation="allow",ratelimiter_outcome="granted"} 2
	// ratelimiter_decisions_total{ratelimiter_name="example-prometheus-api",ratelimiter_operation="allow",ratelimiter_outcome="refused"} 1
	// ratelimiter_permits_granted_total{ratelimiter_name="example-prometheus-api",ratelimiter_operation="allow"} 2
}
