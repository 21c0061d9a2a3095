package grpclimit_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/goredisson/ratelimiter/internal/redistest"
)

// redisAddr is the real redis-server that the tests and examples share;
// each test uses a prefix of its own.
var redisAddr string

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{}) // the failure tests dial dead ports on purpose
	os.Exit(redistest.Main(m, &redisAddr, nil))
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func newRedis(t testing.TB) *redis.Client { return redistest.Client(t, redisAddr) }

var seq atomic.Int64

// prefix gives each test its own limiter names on the shared server.
func prefix(t testing.TB) string {
	return fmt.Sprintf("t%d-%s:", seq.Add(1), strings.ReplaceAll(t.Name(), "/", "-"))
}

// health is a gRPC service (the standard health service) that counts the
// calls reaching it, records when they arrived, and runs an optional
// check on each call's context.
type health struct {
	healthpb.UnimplementedHealthServer
	mu    sync.Mutex
	at    []time.Time
	check func(ctx context.Context)
}

func (h *health) arrived(ctx context.Context) {
	h.mu.Lock()
	h.at = append(h.at, time.Now())
	check := h.check
	h.mu.Unlock()
	if check != nil {
		check(ctx)
	}
}

func (h *health) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.at)
}

func (h *health) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	h.arrived(ctx)
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// Watch sends one status and ends the stream.
func (h *health) Watch(_ *healthpb.HealthCheckRequest, s healthpb.Health_WatchServer) error {
	h.arrived(s.Context())
	return s.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING})
}

// startServer serves h on a real 127.0.0.1 listener with opts and returns
// a health client connected to it over loopback TCP.
func startServer(t testing.TB, h *health, opts ...grpc.ServerOption) healthpb.HealthClient {
	t.Helper()
	return healthpb.NewHealthClient(dial(t, listen(t, h, opts...)))
}

func listen(t testing.TB, h *health, opts ...grpc.ServerOption) string {
	t.Helper()
	srv := grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(srv, h)
	return serveOn(t, srv)
}

// serveOn serves srv on a real 127.0.0.1 listener until t ends and
// returns its address.
func serveOn(t testing.TB, srv *grpc.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

func dial(t testing.TB, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { cc.Close() })
	return cc
}

// deadAddr returns a loopback address where nothing listens.
func deadAddr(t testing.TB) string {
	port, err := redistest.FreePort()
	require.NoError(t, err)
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// silentListener returns the address of a loopback listener that accepts
// connections and never answers.
func silentListener(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// warmUp makes cc connect and waits until it is ready, so that dialing
// does not delay the first limited call.
func warmUp(t testing.TB, cc *grpc.ClientConn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cc.Connect()
	for s := cc.GetState(); s != connectivity.Ready; s = cc.GetState() {
		require.True(t, cc.WaitForStateChange(ctx, s), "connection not ready")
	}
}
