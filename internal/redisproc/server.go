// Package redisproc starts throwaway redis-server processes on loopback, for
// the CLI's demo and for the tests (internal/redistest). It never mocks
// Redis: every server is the real binary, so Lua scripts run exactly as
// they will in production. It does not import package testing, so the
// demo's binary does not link it.
package redisproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrNoServer reports that no redis-server binary was found on PATH.
var ErrNoServer = errors.New("redisproc: redis-server not found on PATH (install it: make deps, or apt-get install -y redis-server)")

// Server is one redis-server process, or an external server named by
// REDIS_ADDR.
type Server struct {
	addr    string
	cmd     *exec.Cmd
	dir     string
	out     *bytes.Buffer
	cmdline []string // for Restart
	port    int
	extra   []string

	closeOnce sync.Once
	closeErr  error
	exited    chan struct{}
}

// Start returns a running Redis. When REDIS_ADDR is set it returns that
// server and Close does nothing. Otherwise it starts redis-server on a free
// loopback port with persistence off; extra args are passed to redis-server
// as configuration (for example "--maxmemory", "10mb"). It fails when the
// binary is missing (ErrNoServer) or the server does not answer PING before
// ctx is done or 30 seconds pass.
func Start(ctx context.Context, args ...string) (*Server, error) {
	if addr := os.Getenv("REDIS_ADDR"); addr != "" {
		return &Server{addr: addr}, nil
	}
	return StartWrapped(ctx, nil, args...)
}

// StartWrapped is Start that always starts a new redis-server (REDIS_ADDR
// is not used), run by the command in wrapper, for example valgrind with
// its options: wrapper[0] is looked up on PATH and given the rest of
// wrapper, the redis-server path and its arguments.
func StartWrapped(ctx context.Context, wrapper []string, args ...string) (*Server, error) {
	bin, err := exec.LookPath(Binary())
	if err != nil {
		return nil, ErrNoServer
	}
	return startBinary(ctx, wrapper, bin, args...)
}

// Binary is the server binary every harness runs: $REDIS_SERVER (a path,
// as topologies/*.sh read it too), else redis-server on PATH.
func Binary() string {
	if b := os.Getenv("REDIS_SERVER"); b != "" {
		return b
	}
	return "redis-server"
}

// TLSFallback is the server StartTLS runs when the redis-server on PATH
// was built without TLS: Debian's, which has it.
const TLSFallback = "/usr/bin/redis-server"

// StartTLS is Start for a server that must speak TLS (args carry the TLS
// options): when the redis-server on PATH was built without TLS (the
// Redis 6.2 and Valkey builds of scripts/servers.sh), it runs TLSFallback
// instead and says so in note. REDIS_ADDR is not used.
func StartTLS(ctx context.Context, args ...string) (s *Server, note string, err error) {
	s, err = StartWrapped(ctx, nil, args...)
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "tls") {
		return s, "", err
	}
	if _, e := os.Stat(TLSFallback); e != nil {
		return nil, "", fmt.Errorf("%w (and no %s to fall back to)", err, TLSFallback)
	}
	s, err = startBinary(ctx, nil, TLSFallback, args...)
	return s, "the redis-server on PATH has no TLS; TLS runs on " + TLSFallback, err
}

// startBinary starts bin (wrapped by wrapper) on a free port.
func startBinary(ctx context.Context, wrapper []string, bin string, args ...string) (*Server, error) {
	cmdline := append(append([]string(nil), wrapper...), bin)
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, err
	}
	// A port found free can be taken before redis binds it; retry a few times.
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := FreePort()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		s, err := startOn(ctx, cmdline, dir, port, args)
		if err == nil {
			return s, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	os.RemoveAll(dir)
	return nil, lastErr
}

func startOn(ctx context.Context, cmdline []string, dir string, port int, extra []string) (*Server, error) {
	args := []string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--dir", dir,
		"--save", "",
		"--appendonly", "no",
		"--daemonize", "no",
		"--protected-mode", "yes",
		"--loglevel", "warning",
	}
	args = append(args, extra...)
	s := &Server{
		addr:    net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		dir:     dir,
		out:     &bytes.Buffer{},
		exited:  make(chan struct{}),
		cmdline: cmdline,
		port:    port,
		extra:   extra,
	}
	s.cmd = exec.Command(cmdline[0], append(cmdline[1:], args...)...)
	s.cmd.Stdout = s.out
	s.cmd.Stderr = s.out
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = s.cmd.Wait(); close(s.exited) }()

	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := Ping(ctx, s.addr); err == nil {
			return s, nil
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("redisproc: redis-server on port %d exited: %s", port, s.out.String())
		case <-ctx.Done():
			s.kill()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.kill()
			return nil, fmt.Errorf("redisproc: redis-server on port %d did not answer PING in 30s", port)
		}
	}
}

// Addr returns host:port of the server.
func (s *Server) Addr() string { return s.addr }

// Pid returns the process id, or 0 for an external server.
func (s *Server) Pid() int {
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

func (s *Server) kill() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

// Restart stops the server with SIGTERM (Redis then writes its AOF or
// snapshot, as on an orderly shutdown) and starts it again on the same port
// and directory with the same arguments, so that a server started with
// "--appendonly", "yes" comes back with its data. It fails for an external
// server.
func (s *Server) Restart(ctx context.Context) error {
	if err := s.Stop(); err != nil {
		return err
	}
	return s.Resume(ctx)
}

// Stop stops the server as Restart does (SIGTERM, then SIGKILL after 10
// seconds) and leaves it down, its port closed, until Resume. It fails
// for an external server.
func (s *Server) Stop() error {
	if s.cmd == nil {
		return errors.New("redisproc: cannot stop an external server")
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		s.kill()
	}
	return nil
}

// Resume starts a server that Stop stopped again, as Restart does: on
// the same port and directory with the same arguments.
func (s *Server) Resume(ctx context.Context) error {
	if s.cmd == nil {
		return errors.New("redisproc: cannot resume an external server")
	}
	n, err := startOn(ctx, s.cmdline, s.dir, s.port, s.extra)
	if err != nil {
		return err
	}
	s.cmd, s.out, s.exited = n.cmd, n.out, n.exited
	return nil
}

// Close stops the server and removes its directory. It is safe to call more
// than once; an external server (REDIS_ADDR) is left running.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		if s.cmd == nil {
			return
		}
		s.kill()
		s.closeErr = os.RemoveAll(s.dir)
	})
	return s.closeErr
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Ping sends a RESP PING to addr and reports whether PONG came back. It
// needs no client library, so the harness works before any is set up.
func Ping(ctx context.Context, addr string) error {
	d := net.Dialer{Timeout: time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	buf := make([]byte, 7)
	n, err := conn.Read(buf)
	if err != nil {
		return err
	}
	if string(buf[:n]) != "+PONG\r\n" {
		return fmt.Errorf("redisproc: unexpected PING answer %q", buf[:n])
	}
	return nil
}
