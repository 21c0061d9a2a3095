// Package gate holds what the httplimit and grpclimit middlewares share:
// limiter names made from request keys, configuring limiters on first use,
// and taking permits for an incoming request (decide) or before an
// outgoing call (wait). It is public so that grpclimit, a module of its
// own, can build on it; a middleware for another protocol can too. It
// follows the core module's version: its API may change in a minor
// version before v1.0.0, as the core's may (CHANGELOG.md).
package gate

import (
	"crypto/sha256"
	"encoding/hex"
)

// MaxKeyLen is the longest key used as it is in a limiter name; longer or
// unsafe keys are hashed.
const MaxKeyLen = 128

// Name returns prefix + key when key is at most MaxKeyLen printable ASCII
// characters without '{' or '}', otherwise prefix + "sha256:" + the hex
// SHA-256 of key, so that no request can choose a name that breaks Redis
// Cluster slots or bloats Redis.
func Name(prefix, key string) string {
	if SafeName(key, MaxKeyLen) {
		return prefix + key
	}
	sum := sha256.Sum256([]byte(key))
	return prefix + "sha256:" + hex.EncodeToString(sum[:])
}

// SafeName reports whether s, at most max bytes of printable ASCII without
// '{' or '}', can be used in a limiter name as it is.
func SafeName(s string, max int) bool {
	if len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < ' ' || c >= 0x7f || c == '{' || c == '}' {
			return false
		}
	}
	return true
}
