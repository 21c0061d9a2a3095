package script

import "errors"

// ErrNotSent is wrapped by the error of a script call whose context ended
// while it waited, unsent, for a flight (pipe.do): Redis never saw it, so
// it says nothing about whether Redis answers.
var ErrNotSent = errors.New("ratelimiter: the call was not sent: its context ended while it waited for a flight")
