package script

import "errors"

// ErrNotSent wraps the error of an acquire call that was never sent to
// Redis: its context ended while it waited for a flight (pipe.go). The
// error also wraps the context's.
var ErrNotSent = errors.New("ratelimiter: the call was not sent: its context ended while it waited for a flight")
