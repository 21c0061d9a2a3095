//go:build !linux

package redistest

import "time"

func becomeSubreaper()              {}
func reap(pid int, d time.Duration) {}
