package httplimit

import (
	"net"
	"net/http"
	"strings"
)

// KeyFunc picks the key that names a request's limiter. Returning "" makes
// the middleware answer 400 Bad Request (see ErrNoKey).
type KeyFunc func(r *http.Request) string

// KeyByIP keys requests by the IP address of the connection's remote end
// (http.Request.RemoteAddr), as "ip:" + address. It ignores
// X-Forwarded-For and similar headers, which clients can forge; behind a
// trusted proxy that sets a header, use KeyByHeader on that header.
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
