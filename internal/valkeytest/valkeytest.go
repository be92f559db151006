// Package valkeytest starts throwaway Valkey (or Redis) servers for tests: one server, a cluster of several,
// or a Sentinel that monitors a server, each on a free loopback port with nothing persisted, killed when the
// test ends.
//
// The server binary is the one named by the environment variable LOOM_VALKEY_SERVER, else valkey-server or
// redis-server on PATH. When none is found the test is skipped, unless LOOM_REQUIRE_VALKEY=1 (CI sets it):
// then it fails.
package valkeytest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Environment variables the package reads.
const (
	// EnvServer names the server binary to run instead of looking for one on PATH.
	EnvServer = "LOOM_VALKEY_SERVER"
	// EnvRequire, set to 1, turns a missing server binary from a skip into a failure.
	EnvRequire = "LOOM_REQUIRE_VALKEY"
)

// startTimeout bounds how long a server may take to answer its first PING: a bound only a hang breaks,
// since a loaded machine can be slow to start a process (a server that cannot start exits, and that is
// seen at once).
const startTimeout = time.Minute

// replyTimeout bounds Do's dial and the server's reply, as startTimeout bounds a start.
const replyTimeout = time.Minute

// Server is one running server. Stop and Restart let fault tests take it away and bring it back on the same
// address. It is safe for concurrent use.
type Server struct {
	// Addr is the server's host:port on 127.0.0.1.
	Addr string

	tb   testing.TB
	bin  string
	args []string
	dir  string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// Binary returns the server binary Start would run, or "" if there is none.
func Binary() string {
	if p := os.Getenv(EnvServer); p != "" {
		return p
	}
	for _, name := range []string{"valkey-server", "redis-server"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

func binary(tb testing.TB) string {
	tb.Helper()
	bin := Binary()
	if bin == "" {
		msg := "no valkey-server or redis-server on PATH (or set " + EnvServer + ")"
		if os.Getenv(EnvRequire) == "1" {
			tb.Fatal(msg + "; " + EnvRequire + "=1 requires one")
		}
		tb.Skip(msg)
	}
	return bin
}

// Start starts a standalone server for the test and returns its address. It is killed when the test ends.
func Start(tb testing.TB) (addr string) {
	tb.Helper()
	return StartServer(tb).Addr
}

// StartServer starts a standalone server for the test and returns its handle. It is killed when the test
// ends.
func StartServer(tb testing.TB, extraArgs ...string) *Server {
	tb.Helper()
	return startServer(tb, binary(tb), extraArgs)
}

func startServer(tb testing.TB, bin string, extraArgs []string) *Server {
	tb.Helper()
	return startProcess(tb, bin, func(port int, dir string) ([]string, error) {
		return append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", dir, "--daemonize", "no", "--protected-mode", "no"}, extraArgs...), nil
	})
}

// startProcess runs bin with the arguments args gives for a free port and a new directory, retrying with
// another port if the server cannot start, and returns it once it answers PING.
func startProcess(tb testing.TB, bin string, args func(port int, dir string) ([]string, error)) *Server {
	tb.Helper()
	var lastErr error
	for range 5 { // the free port may be taken before the server binds it
		port, err := freePort()
		if err != nil {
			tb.Fatal(err)
		}
		dir := tb.TempDir()
		s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), tb: tb, bin: bin, dir: dir}
		if s.args, err = args(port, dir); err != nil {
			tb.Fatalf("valkeytest: %v", err)
		}
		if lastErr = s.start(); lastErr == nil {
			tb.Cleanup(s.kill)
			return s
		}
	}
	tb.Fatalf("valkeytest: %v", lastErr)
	return nil
}

// SentinelMaster is the name of the master set a sentinel of StartSentinel monitors.
const SentinelMaster = "mymaster"

// StartSentinel starts a Sentinel (the server binary run with --sentinel) on a free loopback port that
// monitors the server at masterAddr as master set SentinelMaster, with a quorum of 1 and
// down-after-milliseconds 1000, and returns its handle once it answers PING and names the master. Its
// configuration file, which a sentinel must be able to rewrite, is in a directory of its own; extraConfig
// are more lines for it, such as "sentinel auth-pass mymaster <password>" for a master that requires one.
// It is killed when the test ends.
func StartSentinel(tb testing.TB, masterAddr string, extraConfig ...string) *Server {
	tb.Helper()
	host, port, err := net.SplitHostPort(masterAddr)
	if err != nil {
		tb.Fatalf("valkeytest: master address %q: %v", masterAddr, err)
	}
	s := startProcess(tb, binary(tb), func(p int, dir string) ([]string, error) {
		conf := filepath.Join(dir, "sentinel.conf")
		text := fmt.Sprintf("port %d\nbind 127.0.0.1\nprotected-mode no\ndaemonize no\n"+
			"sentinel monitor %s %s %s 1\nsentinel down-after-milliseconds %s 1000\n",
			p, SentinelMaster, host, port, SentinelMaster)
		for _, line := range extraConfig {
			text += line + "\n"
		}
		return []string{conf, "--sentinel"}, os.WriteFile(conf, []byte(text), 0o600)
	})
	deadline := time.Now().Add(startTimeout)
	for {
		r, err := Do(s.Addr, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", SentinelMaster)
		if err == nil && len(r) == 2 && net.JoinHostPort(r[0], r[1]) == net.JoinHostPort(host, port) {
			return s
		}
		if time.Now().After(deadline) {
			tb.Fatalf("valkeytest: the sentinel on %s does not name the master %s: %q, %v", s.Addr, masterAddr, r, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("valkeytest: no free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// start runs the server and waits until it answers PING (with PONG, or NOAUTH when it wants a password).
func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return nil
	}
	log, err := os.OpenFile(filepath.Join(s.dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(s.bin, s.args...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = log, log
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	exited := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		err := cmd.Wait()
		exited <- err
		close(done)
	}()
	deadline := time.Now().Add(startTimeout)
	for {
		// A server started with --requirepass answers NOAUTH: it is up.
		if reply, err := Do(s.Addr, "PING"); err == nil && len(reply) == 1 && reply[0] == "PONG" ||
			err != nil && strings.HasPrefix(err.Error(), "NOAUTH ") {
			s.cmd, s.done = cmd, done
			return nil
		}
		select {
		case err := <-exited:
			out, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
			return fmt.Errorf("%s on %s exited (%v): %s", filepath.Base(s.bin), s.Addr, err, lastLines(string(out), 5))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			return fmt.Errorf("%s on %s did not answer PING within %v", filepath.Base(s.bin), s.Addr, startTimeout)
		}
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// Stop kills the server (SIGKILL: it saves nothing on the way out); its address refuses connections until
// Restart. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// Restart starts a stopped server again on the same address, with the same arguments and directory, and
// waits until it answers PING; it fails the test if it cannot. The server comes back empty, as after a
// restart without persistence, unless it was started with persistence ("--appendonly", "yes" among
// StartServer's extraArgs): then it loads what it persisted. Each start has a new run_id. Restarting a
// running server does nothing.
func (s *Server) Restart() {
	s.tb.Helper()
	if err := s.start(); err != nil {
		s.tb.Fatalf("valkeytest: restart: %v", err)
	}
}

func (s *Server) kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		_ = s.cmd.Process.Kill()
		<-s.done
		s.cmd = nil
	}
}

// Cluster is a running cluster of primaries without replicas, the hash slots shared evenly among them.
type Cluster struct {
	// Servers are the nodes; Servers[i] serves the i-th share of the slots.
	Servers []*Server
}

// Addrs returns the nodes' addresses.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		out[i] = s.Addr
	}
	return out
}

// StartCluster starts n (at least 1; 3 is usual) cluster-enabled servers, assigns the 16384 hash slots in
// even ranges with CLUSTER ADDSLOTSRANGE (Redis 7.0 or later), joins them with CLUSTER MEET and waits until
// every node reports cluster_state:ok. The nodes are killed when the test ends.
func StartCluster(tb testing.TB, n int) *Cluster {
	tb.Helper()
	if n < 1 {
		tb.Fatalf("valkeytest: a cluster of %d nodes", n)
	}
	bin := binary(tb)
	c := &Cluster{}
	for range n {
		dir := tb.TempDir()
		c.Servers = append(c.Servers, startServer(tb, bin, []string{"--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(dir, "nodes.conf"), "--cluster-node-timeout", "5000"}))
	}
	const slots = 16384
	for i, s := range c.Servers {
		lo, hi := i*slots/n, (i+1)*slots/n-1
		if _, err := Do(s.Addr, "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(lo), strconv.Itoa(hi)); err != nil {
			tb.Fatalf("valkeytest: CLUSTER ADDSLOTSRANGE on %s: %v", s.Addr, err)
		}
	}
	for _, s := range c.Servers[1:] {
		host, port, _ := net.SplitHostPort(s.Addr)
		if _, err := Do(c.Servers[0].Addr, "CLUSTER", "MEET", host, port); err != nil {
			tb.Fatalf("valkeytest: CLUSTER MEET %s: %v", s.Addr, err)
		}
	}
	deadline := time.Now().Add(startTimeout + 10*time.Second)
	for _, s := range c.Servers {
		for {
			info, err := Do(s.Addr, "CLUSTER", "INFO")
			if err == nil && strings.Contains(info[0], "cluster_state:ok") &&
				strings.Contains(info[0], "cluster_known_nodes:"+strconv.Itoa(n)+"\r") {
				break
			}
			if time.Now().After(deadline) {
				tb.Fatalf("valkeytest: the cluster did not come up: %v %q", err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return c
}

// Do sends one command to the server at addr on a fresh connection and returns its reply flattened to
// strings (a nil reply is ""). A server error reply is returned as an error.
func Do(addr string, args ...string) ([]string, error) {
	c, err := net.DialTimeout("tcp", addr, replyTimeout)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(replyTimeout))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(c, b.String()); err != nil {
		return nil, err
	}
	var out []string
	if err := readReply(bufio.NewReader(c), &out); err != nil {
		return nil, err
	}
	return out, nil
}

// readReply reads one RESP2 reply and appends its strings to out.
func readReply(r *bufio.Reader, out *[]string) error {
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return errors.New("valkeytest: empty reply line")
	}
	switch line[0] {
	case '+', ':':
		*out = append(*out, line[1:])
	case '-':
		return errors.New(line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return fmt.Errorf("valkeytest: bad bulk length %q", line)
		}
		if n < 0 {
			*out = append(*out, "")
			return nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return err
		}
		*out = append(*out, string(buf[:n]))
	case '*':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return fmt.Errorf("valkeytest: bad array length %q", line)
		}
		for range max(n, 0) {
			if err := readReply(r, out); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("valkeytest: unexpected reply %q", line)
	}
	return nil
}
