package main

import (
	"errors"

	"github.com/redis/go-redis/v9"
)

// Reading a limiter's keys through a pipeline: go-redis returns only the
// first command's error, and a reader that skipped a failed command would
// take a refused read (NOPERM) for an empty key. readErr looks at every
// command's own error instead.

// readErr returns the first error among cmds that is a failed read: any
// error but redis.Nil (a missing key, which is an answer) and, when
// wrongTypeIsAnswer, WRONGTYPE (a key of another type, which inspect and
// the exporter report as state the scripts refuse). A NOPERM, a network
// error or a timeout is always a failed read.
func readErr(wrongTypeIsAnswer bool, cmds ...redis.Cmder) error {
	for _, c := range cmds {
		if c == nil {
			continue
		}
		err := c.Err()
		switch {
		case err == nil, errors.Is(err, redis.Nil):
		case wrongTypeIsAnswer && isWrongType(err):
		default:
			return err
		}
	}
	return nil
}
