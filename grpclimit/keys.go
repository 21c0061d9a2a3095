package grpclimit

import (
	"context"
	"net"
	"strings"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// KeyFunc picks the key that names a call's limiter from the call's
// context and full method name ("/package.Service/Method"). Returning ""
// fails the call with codes.InvalidArgument (see ErrNoKey).
type KeyFunc func(ctx context.Context, fullMethod string) string

// KeyByPeer keys calls by the IP address of the connection's remote end,
// as "ip:" + address (the whole address when it is not TCP). It ignores
// metadata such as x-forwarded-for, which clients can forge; behind a
// trusted proxy that sets one, use KeyByMetadata on it.
func KeyByPeer(ctx context.Context, _ string) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return ""
	}
	addr := p.Addr.String()
	if host, _, err := net.SplitHostPort(addr); err == nil {
		addr = host
	}
	if addr == "" {
		return ""
	}
	return "ip:" + addr
}

// KeyByMetadata returns a KeyFunc that keys calls by the first value of
// the incoming metadata key name (for example an API key), as the
// lower-cased name + ":" + value. It returns "" when the key is absent or
// empty; combine it with KeyFirst to fall back to another key.
func KeyByMetadata(name string) KeyFunc {
	name = strings.ToLower(name)
	return func(ctx context.Context, _ string) string {
		v := metadata.ValueFromIncomingContext(ctx, name)
		if len(v) == 0 || v[0] == "" {
			return ""
		}
		return name + ":" + v[0]
	}
}

// KeyByMethod keys calls by their full method name, as "method:" +
// name: one limiter per method, shared by all clients.
func KeyByMethod(_ context.Context, fullMethod string) string {
	return "method:" + fullMethod
}

// KeyFirst returns a KeyFunc that tries fns in order and returns the
// first non-empty key, or "" when every one returns "".
func KeyFirst(fns ...KeyFunc) KeyFunc {
	return func(ctx context.Context, m string) string {
		for _, f := range fns {
			if f == nil {
				continue
			}
			if k := f(ctx, m); k != "" {
				return k
			}
		}
		return ""
	}
}
