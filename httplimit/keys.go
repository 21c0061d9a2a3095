package httplimit

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// KeyFunc picks the key that names a request's limiter. Returning "" makes
// the middleware answer 400 Bad Request (see ErrNoKey).
type KeyFunc func(r *http.Request) string

// KeyByIP keys requests by the IP address of the connection's remote end
// (http.Request.RemoteAddr), as "ip:" + address. It ignores
// X-Forwarded-For and similar headers, which clients can forge; behind
// trusted proxies use KeyByForwardedFor, and KeyByIPPrefix to key IPv6
// clients by their network rather than by each of their addresses.
func KeyByIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if host == "" {
		return ""
	}
	return "ip:" + host
}

// KeyByHeader returns a KeyFunc that keys requests by the value of header
// name (for example an API key), as name + ":" + value. It returns "" when
// the header is absent or empty, so such requests get 400; combine it
// with KeyFirst to fall back to another key.
func KeyByHeader(name string) KeyFunc {
	canon := http.CanonicalHeaderKey(name)
	return func(r *http.Request) string {
		v := r.Header.Get(canon)
		if v == "" {
			return ""
		}
		return canon + ":" + v
	}
}

// KeyFirst returns a KeyFunc that tries fns in order and returns the
// first non-empty key, or "" when every one returns "".
func KeyFirst(fns ...KeyFunc) KeyFunc {
	return func(r *http.Request) string {
		for _, f := range fns {
			if f == nil {
				continue
			}
			if k := f(r); k != "" {
				return k
			}
		}
		return ""
	}
}

// KeyByRoute returns a KeyFunc that keys requests by route, one limiter
// per route shared by all clients: "route:" + the http.ServeMux pattern
// that matched (r.Pattern, set when the Middleware wraps a handler
// registered on a ServeMux, with "{" and "}" of wildcards written "<"
// and ">"), or else "route:" + method + " " + URL path.
// Paths are chosen by clients, so prefer wrapping registered handlers,
// and set Config.KeepAlive so unused limiters expire. Combine it with a
// client key by writing your own KeyFunc.
func KeyByRoute() KeyFunc {
	// Wildcards such as {id} become <id>: braces would make the name
	// unsafe (and hashed), see Middleware.Name.
	return func(r *http.Request) string {
		if r.Pattern != "" {
			return "route:" + routeBraces.Replace(r.Pattern)
		}
		return "route:" + r.Method + " " + r.URL.Path
	}
}

var routeBraces = strings.NewReplacer("{", "<", "}", ">")

// KeyByIPPrefix returns a KeyFunc that keys requests by the network of the
// connection's remote address: its first v4Bits bits for IPv4 and v6Bits
// for IPv6, as "net:" + the prefix (for example "net:2001:db8:1::/48").
// A client given an IPv6 /64 (or larger) holds every address in it, so
// keying by the whole address would give it a fresh budget per address;
// /64 for IPv6 and /32 for IPv4 key a subscriber. Bits beyond an address's
// length are taken as its length. It returns "" when RemoteAddr holds no
// IP address.
func KeyByIPPrefix(v4Bits, v6Bits int) KeyFunc {
	return func(r *http.Request) string {
		addr, ok := remoteIP(r.RemoteAddr)
		if !ok {
			return ""
		}
		return prefixKey(addr, v4Bits, v6Bits)
	}
}

// KeyByForwardedFor returns a KeyFunc for a service behind proxies: it
// keys a request by the client address its trusted proxies saw, as
// KeyByIPPrefix(v4Bits, v6Bits) would key a direct connection. When the
// connection comes from a trusted proxy (an address in trusted), it reads
// X-Forwarded-For from the right, skipping the addresses of trusted
// proxies, and takes the first that is not one; an entry that is not an
// IP address ends the walk and keys by that entry's proxy. A connection
// from anywhere else is keyed by its own address, so a client that forges
// the header gains nothing. Use 128 and 32 bits to key single addresses.
func KeyByForwardedFor(trusted []netip.Prefix, v4Bits, v6Bits int) KeyFunc {
	isTrusted := func(a netip.Addr) bool {
		for _, p := range trusted {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	return func(r *http.Request) string {
		client, ok := remoteIP(r.RemoteAddr)
		if !ok {
			return ""
		}
		hops := forwardedHops(r.Header.Values("X-Forwarded-For"))
		for i := len(hops) - 1; i >= 0 && isTrusted(client); i-- {
			a, err := netip.ParseAddr(hops[i])
			if err != nil {
				break
			}
			client = a.Unmap()
		}
		return prefixKey(client, v4Bits, v6Bits)
	}
}

// remoteIP parses the address of RemoteAddr ("host:port" or a bare host).
func remoteIP(remote string) (netip.Addr, bool) {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// forwardedHops splits X-Forwarded-For values into their addresses, in
// order, trimmed.
func forwardedHops(values []string) []string {
	var hops []string
	for _, v := range values {
		for _, h := range strings.Split(v, ",") {
			hops = append(hops, strings.TrimSpace(h))
		}
	}
	return hops
}

// prefixKey is "net:" + a's network of v4Bits or v6Bits bits.
func prefixKey(a netip.Addr, v4Bits, v6Bits int) string {
	bits := v6Bits
	if a.Is4() {
		bits = v4Bits
	}
	bits = min(max(bits, 0), a.BitLen())
	p, err := a.WithZone("").Prefix(bits)
	if err != nil {
		return ""
	}
	return "net:" + p.String()
}
