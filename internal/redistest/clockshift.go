package redistest

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// clockShiftC is a preload library that moves a process's wall clock
// (CLOCK_REALTIME, gettimeofday, time) by an offset in µs read from the
// 8 bytes (little-endian) of the file named by CLOCKSHIFT_FILE, mapped
// shared so that a write to the file steps the clock at once. It calls
// the kernel directly: no dlsym and no malloc, which Redis's jemalloc
// would re-enter (libfaketime fails there for that reason). Monotonic
// clocks are left alone, as an NTP step leaves them.
const clockShiftC = `
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile int64_t *shift_us;
static int shift_tried;

static int64_t offset(void) {
	if (!shift_tried) {
		shift_tried = 1;
		const char *p = getenv("CLOCKSHIFT_FILE");
		if (p) {
			int fd = open(p, O_RDONLY);
			if (fd >= 0) {
				void *m = mmap(0, 8, PROT_READ, MAP_SHARED, fd, 0);
				if (m != MAP_FAILED) shift_us = (volatile int64_t *)m;
				close(fd);
			}
		}
	}
	return shift_us ? *shift_us : 0;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
	int r = syscall(SYS_clock_gettime, id, ts);
	if (r == 0 && ts && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) {
		int64_t ns = (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec + offset() * 1000;
		ts->tv_sec = ns / 1000000000;
		ts->tv_nsec = ns % 1000000000;
	}
	return r;
}

int gettimeofday(struct timeval *tv, void *tz) {
	int r = syscall(SYS_gettimeofday, tv, tz);
	if (r == 0 && tv) {
		int64_t us = (int64_t)tv->tv_sec * 1000000 + tv->tv_usec + offset();
		tv->tv_sec = us / 1000000;
		tv->tv_usec = us % 1000000;
	}
	return r;
}

time_t time(time_t *t) {
	struct timeval tv;
	gettimeofday(&tv, 0);
	if (t) *t = tv.tv_sec;
	return tv.tv_sec;
}
`

// ClockShift is a wall clock offset for redis-server processes started
// with its Wrapper: a host whose clock differs from this one's, or one
// whose clock steps (an NTP step) when Set is called.
type ClockShift struct {
	file string
	lib  string
}

// NewClockShift builds the preload library with the C compiler (cc, which
// the race detector needs too) and returns a shift of d. It fails the
// test when there is no compiler.
func NewClockShift(t testing.TB, d time.Duration) *ClockShift {
	t.Helper()
	dir := t.TempDir()
	src, lib := filepath.Join(dir, "clockshift.c"), filepath.Join(dir, "clockshift.so")
	if err := os.WriteFile(src, []byte(clockShiftC), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cc", "-shared", "-fPIC", "-O2", "-o", lib, src).CombinedOutput(); err != nil {
		t.Fatalf("building the clock shift library (needs cc: apt-get install gcc): %v\n%s", err, out)
	}
	c := &ClockShift{file: filepath.Join(dir, "shift"), lib: lib}
	c.Set(t, d)
	return c
}

// Set moves the clock of every process started with Wrapper to this
// host's clock plus d, at once.
func (c *ClockShift) Set(t testing.TB, d time.Duration) {
	t.Helper()
	b := binary.LittleEndian.AppendUint64(nil, uint64(d.Microseconds()))
	// Written in place (not replaced): the processes map this file.
	f, err := os.OpenFile(c.file, os.O_CREATE|os.O_WRONLY, 0o600)
	if err == nil {
		_, err = f.WriteAt(b, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		t.Fatal(err)
	}
}

// Wrapper is the command that starts a process on the shifted clock
// (redisproc.StartWrapped's wrapper).
func (c *ClockShift) Wrapper() []string {
	return []string{"env", "LD_PRELOAD=" + c.lib, "CLOCKSHIFT_FILE=" + c.file}
}
