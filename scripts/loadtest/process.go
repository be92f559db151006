package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// startTimeout bounds how long a server may take to answer its first request.
const startTimeout = 15 * time.Second

// process is one child process, its output in a log file.
type process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{} // closed when the process has exited
	err     error         // Wait's error, set before done is closed
}

// startProcess starts bin with args and env (added to ours), its output appended to logPath. The process
// dies with this one (on Linux) even if this one is killed.
func startProcess(name, bin string, args, env []string, logPath string) (*process, error) {
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	defer log.Close()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = log, log
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has exited.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signal sends sig and waits up to timeout for the process to exit. It returns the process's exit error
// (nil for a clean exit) or an error if it did not exit in time.
func (p *process) signal(sig syscall.Signal, timeout time.Duration) error {
	if !p.exited() {
		if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return fmt.Errorf("signal %s: %w", p.name, err)
		}
	}
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		return fmt.Errorf("%s did not exit within %v of %v", p.name, timeout, sig)
	}
}

// kill kills the process and waits for it, if it is still running.
func (p *process) kill() {
	_ = p.signal(syscall.SIGKILL, 5*time.Second)
}

// logTail returns the last n lines of the process's log.
func (p *process) logTail(n int) string {
	out, _ := os.ReadFile(p.logPath)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// waitUntil polls ready every 20 ms until it reports true, the process exits or startTimeout passes.
func (p *process) waitUntil(ctx context.Context, ready func() bool) error {
	deadline := time.Now().Add(startTimeout)
	for !ready() {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited (%v): %s", p.name, p.err, p.logTail(5))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready within %v: %s", p.name, startTimeout, p.logTail(5))
		}
	}
	return nil
}

// freeAddr returns a loopback address with a port nobody listens on (at the time of the call).
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("no free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// valkeyServer is a Valkey-protocol server of the test's own, on a loopback port.
type valkeyServer struct {
	env     *environment
	name    string
	addr    string
	dir     string
	persist bool // an append-only file fsynced on every write, so data survives a restart
	proc    *process
}

// startValkey starts a server in a directory of its own. Without persist nothing is saved (--save ""
// --appendonly no); with it every write is appended and fsynced before the reply (--appendonly yes
// --appendfsync always), so a server stopped by SIGTERM and started again has every acknowledged write.
func startValkey(ctx context.Context, env *environment, name string, persist bool) (*valkeyServer, error) {
	dir := env.path(name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	var lastErr error
	for range 3 { // the free port may be taken before the server binds it
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		v := &valkeyServer{env: env, name: name, addr: addr, dir: dir, persist: persist}
		if lastErr = v.start(ctx); lastErr == nil {
			return v, nil
		}
	}
	return nil, lastErr
}

// args returns the server's command line.
func (v *valkeyServer) args() []string {
	_, port, _ := net.SplitHostPort(v.addr)
	args := []string{"--port", port, "--bind", "127.0.0.1", "--dir", v.dir, "--save", "", "--daemonize", "no",
		"--protected-mode", "no"}
	if v.persist {
		return append(args, "--appendonly", "yes", "--appendfsync", "always")
	}
	return append(args, "--appendonly", "no")
}

// start starts the server on its address and waits until it answers PING.
func (v *valkeyServer) start(ctx context.Context) error {
	p, err := startProcess(v.name, v.env.valkeyBin, v.args(), nil, v.env.path(v.name+".log"))
	if err != nil {
		return err
	}
	v.env.track(p)
	if err := p.waitUntil(ctx, func() bool { return pingValkey(v.addr) == nil }); err != nil {
		p.kill()
		return err
	}
	v.proc = p
	return nil
}

// stop sends SIGTERM, which makes the server flush its append-only file and exit, and waits for the exit.
func (v *valkeyServer) stop() error {
	if err := v.proc.signal(syscall.SIGTERM, 10*time.Second); err != nil {
		return fmt.Errorf("stop %s: %w", v.name, err)
	}
	return nil
}

// url returns the server's store URL for loom serve.
func (v *valkeyServer) url() string { return "valkey://" + v.addr }

// pingValkey sends PING on a fresh connection and expects +PONG.
func pingValkey(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return fmt.Errorf("PING: %q", strings.TrimSpace(line))
	}
	return nil
}

// loomServer is a `loom serve` process with the two tenants' keys.
type loomServer struct {
	env      *environment
	name     string
	addr     string
	storeURL string
	proc     *process
}

// startLoom starts loom serve on storeURL at a free loopback port and waits until /healthz answers.
func startLoom(ctx context.Context, env *environment, name, storeURL string) (*loomServer, error) {
	var lastErr error
	for range 3 { // the free port may be taken before the server binds it
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		s := &loomServer{env: env, name: name, addr: addr, storeURL: storeURL}
		if lastErr = s.start(ctx); lastErr == nil {
			return s, nil
		}
	}
	return nil, lastErr
}

// start starts the server on its address and store and waits until GET /healthz gives 200.
func (s *loomServer) start(ctx context.Context) error {
	args := []string{"serve", "--addr", s.addr, "--store", s.storeURL, "--log-format", "json"}
	keys := "LOOM_API_KEYS=" + keyA + "=" + tenantA + "," + keyB + "=" + tenantB
	p, err := startProcess(s.name, s.env.loomBin, args, []string{keys}, s.env.path(s.name+".log"))
	if err != nil {
		return err
	}
	s.env.track(p)
	hc := &http.Client{Timeout: time.Second}
	healthy := func() bool {
		resp, err := hc.Get(s.baseURL() + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	if err := p.waitUntil(ctx, healthy); err != nil {
		p.kill()
		return err
	}
	s.proc = p
	return nil
}

// baseURL returns the server's http:// URL.
func (s *loomServer) baseURL() string { return "http://" + s.addr }

// stop sends SIGTERM (a graceful shutdown) and waits for the exit; a non-zero exit is an error.
func (s *loomServer) stop() error {
	if err := s.proc.signal(syscall.SIGTERM, 20*time.Second); err != nil {
		return fmt.Errorf("stop %s: %w", s.name, err)
	}
	return nil
}

// panics counts the lines of the server's log that report a panic, recovered or not.
func (s *loomServer) panics() int {
	out, _ := os.ReadFile(s.proc.logPath)
	n := 0
	for line := range strings.Lines(string(out)) {
		if strings.HasPrefix(line, "panic:") || strings.Contains(line, `"msg":"panic"`) {
			n++
		}
	}
	return n
}
