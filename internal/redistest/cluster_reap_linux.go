//go:build linux

package redistest

import (
	"sync"
	"syscall"
	"time"
)

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER from <linux/prctl.h>.
const prSetChildSubreaper = 36

var subreaperOnce sync.Once

// becomeSubreaper makes this process adopt the redis processes that the
// start scripts leave running when they exit, so that reap can collect them
// once they are killed (some sandboxes run a PID 1 that never reaps, which
// would leave zombies behind).
func becomeSubreaper() {
	subreaperOnce.Do(func() {
		_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
	})
}

// reap collects pid if it is a dead child of this process. It polls for at
// most d and never blocks longer.
func reap(pid int, d time.Duration) {
	deadline := time.Now().Add(d)
	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		if got == pid || err != nil { // collected, or not our child
			return
		}
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}
