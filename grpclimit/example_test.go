package grpclimit_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/grpclimit"
)

// examplePrefix gives every run of an example fresh limiter names.
func examplePrefix(name string) string { return fmt.Sprintf("example-%s-%d:", name, seq.Add(1)) }

// serveExample serves the health service on 127.0.0.1 with opts and
// returns a client connection to it, and a function that stops both.
func serveExample(opts ...grpc.ServerOption) (*grpc.ClientConn, func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(srv, &health{})
	go srv.Serve(ln)
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	return cc, func() { cc.Close(); srv.Stop() }
}

// Protect a gRPC service: at most 2 calls per client IP per minute; the
// third is refused with ResourceExhausted and a RetryInfo hint. The
// examples use redisAddr, the test server's host:port; use your Redis's.
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	lim, err := grpclimit.New(rdb, ratelimiter.Config{Rate: 2, Interval: time.Minute},
		grpclimit.WithPrefix(examplePrefix("new")))
	if err != nil {
		log.Fatal(err)
	}
	cc, stop := serveExample(grpc.ChainUnaryInterceptor(lim.Unary()), grpc.ChainStreamInterceptor(lim.Stream()))
	defer stop()

	c := healthpb.NewHealthClient(cc)
	for i := 0; i < 3; i++ {
		_, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{})
		hint, ok := grpclimit.RetryAfter(err)
		fmt.Println(status.Code(err), ok, hint > 59*time.Second)
	}
	// Output:
	// OK false false
	// OK false false
	// ResourceExhausted true true
}

// Two limits per client IP at once: 2 per minute and 100 per day. Each
// call takes a permit from both or from neither: the refused third call
// leaves the daily budget at 98, and its QuotaFailure names the rule that
// refused it.
func ExampleWithRules() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	prefix := examplePrefix("rules")
	lim, err := grpclimit.New(rdb, ratelimiter.Config{}, grpclimit.WithPrefix(prefix),
		grpclimit.WithRules(
			grpclimit.Rule{Name: "minute", Config: ratelimiter.Config{Rate: 2, Interval: time.Minute}},
			grpclimit.Rule{Name: "day", Config: ratelimiter.Config{Rate: 100, Interval: 24 * time.Hour}}))
	if err != nil {
		log.Fatal(err)
	}
	cc, stop := serveExample(grpc.ChainUnaryInterceptor(lim.Unary()), grpc.ChainStreamInterceptor(lim.Stream()))
	defer stop()

	c := healthpb.NewHealthClient(cc)
	for i := 0; i < 3; i++ {
		_, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{})
		line := status.Code(err).String()
		for _, d := range status.Convert(err).Details() {
			if q, ok := d.(*errdetails.QuotaFailure); ok {
				line += " " + strings.TrimPrefix(q.Violations[0].Subject, prefix)
			}
		}
		fmt.Println(line)
	}
	names := lim.Names("ip:127.0.0.1")
	left, err := lim.Client().Limiter(names[1]).AvailablePermits(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(strings.TrimPrefix(names[1], prefix), left)
	// Output:
	// OK
	// OK
	// ResourceExhausted {ip:127.0.0.1}:minute
	// {ip:127.0.0.1}:day 98
}

// Hold outgoing calls to a remote service under its limit of 1 per
// minute, shared by every process that uses the same limiter.
func ExampleOutgoing() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	out := &grpclimit.Outgoing{
		Limiter: ratelimiter.NewClient(rdb).Limiter(examplePrefix("out") + "remote"),
		Config:  ratelimiter.Config{Rate: 1, Interval: time.Minute},
		MaxWait: time.Second,
	}
	cc, stop := serveExample() // stands for the remote service
	defer stop()
	limited, err := grpc.NewClient(cc.Target(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(out.Unary()), grpc.WithStreamInterceptor(out.Stream()))
	if err != nil {
		log.Fatal(err)
	}
	defer limited.Close()

	c := healthpb.NewHealthClient(limited)
	for i := 0; i < 2; i++ {
		_, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{})
		fmt.Println(status.Code(err), errors.Is(err, grpclimit.ErrLimited))
	}
	// Output:
	// OK false
	// ResourceExhausted true
}

// Shadow mode: see what a limit would refuse, without refusing anything.
func ExampleWithShadow() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	lim, err := grpclimit.New(rdb, ratelimiter.Config{Rate: 1, Interval: time.Minute},
		grpclimit.WithPrefix(examplePrefix("shadow")), grpclimit.WithKey(grpclimit.KeyByMethod),
		grpclimit.WithShadow(),
		grpclimit.WithDecisionHook(func(_ context.Context, d grpclimit.Decision) {
			if !d.Granted {
				fmt.Println("would refuse", d.Key)
			}
		}))
	if err != nil {
		log.Fatal(err)
	}
	cc, stop := serveExample(grpc.ChainUnaryInterceptor(lim.Unary()))
	defer stop()

	c := healthpb.NewHealthClient(cc)
	for i := 0; i < 2; i++ {
		_, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{})
		fmt.Println(status.Code(err) == codes.OK)
	}
	// Output:
	// true
	// would refuse method:/grpc.health.v1.Health/Check
	// true
}
