// Command grpcfloor is the service section's floor: Envoy's rate-limit
// gRPC API (ShouldRateLimit) answered OK for every descriptor at once,
// with no decision and no Redis. It runs in the section beside the two
// real services, on the same callers, so that its decisions per second
// are the most any service that serves this API with grpc-go's defaults
// reaches in that harness on that machine: what the callers' own gRPC
// work and the server's leave.
//
// Usage: grpcfloor ADDR (a TCP address to listen on). It stops on SIGTERM
// or SIGINT.
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
)

// floor answers every request OK, one status a descriptor, as a real
// service answers a descriptor under its limit (without the limit and
// the remaining count, so its answers are a little smaller).
type floor struct {
	rlspb.UnimplementedRateLimitServiceServer
}

// ShouldRateLimit returns OK for the request and each of its descriptors.
func (floor) ShouldRateLimit(_ context.Context, req *rlspb.RateLimitRequest) (*rlspb.RateLimitResponse, error) {
	st := make([]*rlspb.RateLimitResponse_DescriptorStatus, len(req.GetDescriptors()))
	for i := range st {
		st[i] = &rlspb.RateLimitResponse_DescriptorStatus{Code: rlspb.RateLimitResponse_OK}
	}
	return &rlspb.RateLimitResponse{OverallCode: rlspb.RateLimitResponse_OK, Statuses: st}, nil
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: grpcfloor ADDR")
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	gs := grpc.NewServer()
	rlspb.RegisterRateLimitServiceServer(gs, floor{})
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() { <-sig; gs.Stop() }()
	if err := gs.Serve(ln); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
