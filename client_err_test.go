package ratelimiter_test

import (
	"errors"
	"testing"

	ratelimiter "github.com/goredisson/ratelimiter"
)

// Client.Err tells a usable Client from one every call of which fails,
// without a Redis call.
func TestClientErr(t *testing.T) {
	if err := ratelimiter.NewClient(nil).Err(); !errors.Is(err, ratelimiter.ErrInvalidArgument) {
		t.Errorf("nil Redis client: Err() = %v, want ErrInvalidArgument", err)
	}
	rdb := newRedis(t)
	if err := ratelimiter.NewClient(rdb, ratelimiter.WithClientID("")).Err(); !errors.Is(err, ratelimiter.ErrInvalidArgument) {
		t.Errorf("empty client id: Err() = %v, want ErrInvalidArgument", err)
	}
	if err := ratelimiter.NewClient(rdb, nil).Err(); !errors.Is(err, ratelimiter.ErrInvalidArgument) {
		t.Errorf("nil option: Err() = %v, want ErrInvalidArgument", err)
	}
	if err := ratelimiter.NewClient(rdb).Err(); err != nil {
		t.Errorf("valid Client: Err() = %v", err)
	}
}
