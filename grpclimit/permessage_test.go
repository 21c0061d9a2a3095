package grpclimit_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/grpclimit"
)

// echo is a bidirectional stream that answers every message it receives
// and ends the stream with the first RecvMsg error that is not io.EOF.
type echo struct {
	testpb.UnimplementedTestServiceServer
	got chan int
}

func (e *echo) FullDuplexCall(s testpb.TestService_FullDuplexCallServer) error {
	n := 0
	for {
		_, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			e.got <- n
			return err
		}
		n++
		if err := s.Send(&testpb.StreamingOutputCallResponse{}); err != nil {
			return err
		}
	}
}

// With WithPerMessage a stream takes a permit per message: on a 3 per
// minute limiter three messages are answered and the fourth ends the
// stream with ResourceExhausted; without it the stream takes one permit
// when it opens and any number of messages pass.
func TestPerMessageStreams(t *testing.T) {
	for _, per := range []bool{true, false} {
		opts := []grpclimit.Option{grpclimit.WithPrefix(prefix(t))}
		if per {
			opts = append(opts, grpclimit.WithPerMessage())
		}
		l, err := grpclimit.New(newRedis(t), ratelimiter.Config{Rate: 3, Interval: time.Minute}, opts...)
		require.NoError(t, err)
		e := &echo{got: make(chan int, 1)}
		srv := grpc.NewServer(grpc.ChainStreamInterceptor(l.Stream()))
		testpb.RegisterTestServiceServer(srv, e)
		addr := serveOn(t, srv)
		c := testpb.NewTestServiceClient(dial(t, addr))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		s, err := c.FullDuplexCall(ctx)
		require.NoError(t, err)
		answered := 0
		for i := 0; i < 5; i++ {
			if err := s.Send(&testpb.StreamingOutputCallRequest{}); err != nil {
				break
			}
			if _, err = s.Recv(); err != nil {
				assert.Equal(t, codes.ResourceExhausted, status.Code(err), "per message %v: %v", per, err)
				break
			}
			answered++
		}
		if per {
			assert.Equal(t, 3, answered)
			assert.Equal(t, 3, <-e.got, "the handler got three messages, then the refusal")
		} else {
			assert.Equal(t, 5, answered, "one permit when the stream opened")
		}
		cancel()
	}
}
