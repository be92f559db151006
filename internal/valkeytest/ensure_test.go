package valkeytest_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeSystem is a PATH for scripts/ensure-valkey.sh with stand-ins for id, sudo, apt-get, apt-cache and the
// server binaries, which record what they were asked to do.
type fakeSystem struct {
	uid       int
	sudo      string // "": no sudo; "nopass": sudo -n works; "password": sudo wants a password
	noApt     bool   // no apt-get
	updateRC  int    // apt-get update's exit code
	valkeyPkg bool   // apt has a valkey-server package
	installed string // a server binary on PATH before the script runs: "redis-server 6.0.16", say
	version   string // the version of what apt-get installs; "" means 7.0.15
}

// run runs the script on the fake system (with extra environment variables) and returns its exit code, its
// output and what apt-get was asked to do, one line a call: "DEBIAN_FRONTEND=<value> <args>".
func (f fakeSystem) run(t *testing.T, env ...string) (code int, out string, apt []string) {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	tools := filepath.Join(dir, "tools")
	for _, d := range []string{bin, tools} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The few real tools the script and the stand-ins use, and nothing else of the real PATH (which may
	// hold a real redis-server).
	for _, name := range []string{"env", "head", "grep", "chmod", "true"} {
		p, err := exec.LookPath(name)
		if err != nil {
			t.Skipf("no %s", name)
		}
		if err := os.Symlink(p, filepath.Join(tools, name)); err != nil {
			t.Fatal(err)
		}
	}
	path := bin + ":" + tools
	log := filepath.Join(dir, "apt.log")
	script := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!"+bash+"\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	server := func(name, version string) string {
		return fmt.Sprintf("printf '%%s\\n' '#!%s' 'echo \"Redis server v=%s sha=00000000:0 malloc=libc bits=64\"' > %s/%s\nchmod +x %s/%s\n",
			bash, version, bin, name, bin, name)
	}
	script("id", fmt.Sprintf("[[ $1 == -u ]] && echo %d\n", f.uid))
	switch f.sudo {
	case "nopass":
		// As sudo does by default (env_reset): the command gets a clean environment.
		script("sudo", fmt.Sprintf("[[ $1 == -n ]] && shift\n[[ $1 == -v ]] && exit 0\nexec %s/env -i PATH=%s \"$@\"\n", tools, path))
	case "password":
		script("sudo", "if [[ $1 == -n ]]; then echo 'sudo: a password is required' >&2; else echo 'sudo: a terminal is required to read the password' >&2; fi\nexit 1\n")
	}
	if !f.noApt {
		version := f.version
		if version == "" {
			version = "7.0.15"
		}
		script("apt-get", fmt.Sprintf("echo \"DEBIAN_FRONTEND=${DEBIAN_FRONTEND:-} $*\" >> %s\n"+
			"case \" $* \" in\n"+
			"*' update '*) exit %d ;;\n"+
			"*' install '*valkey-server*) %s ;;\n"+
			"*' install '*redis-server*) %s ;;\n"+
			"esac\n", log, f.updateRC, server("valkey-server", version), server("redis-server", version)))
		candidate := "(none)"
		if f.valkeyPkg {
			candidate = "8.0.2+dfsg1-1"
		}
		script("apt-cache", fmt.Sprintf("echo 'valkey-server:'; echo '  Candidate: %s'\n", candidate))
	}
	if f.installed != "" {
		name, version, _ := strings.Cut(f.installed, " ")
		cmd := exec.Command(bash, "-c", server(name, version))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	cmd := exec.Command(bash, filepath.Join("..", "..", "scripts", "ensure-valkey.sh"))
	cmd.Env = append([]string{"PATH=" + path, "HOME=" + dir}, env...)
	b, err := cmd.CombinedOutput() // stdin is /dev/null: no terminal, as in CI
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	if data, err := os.ReadFile(log); err == nil {
		apt = strings.Split(strings.TrimSpace(string(data)), "\n")
	}
	return code, string(b), apt
}

// TestEnsureValkey: scripts/ensure-valkey.sh (what `make test` runs first) uses a server that is there,
// installs one as root or through sudo (apt-get update first, non-interactively), and fails at once with a
// message saying what to do when it cannot: no sudo, a sudo that wants a password and no terminal, no
// apt-get, a failed update, a server too old for the tests.
func TestEnsureValkey(t *testing.T) {
	t.Parallel()
	const help = "or set LOOM_VALKEY_SERVER to its path"
	for _, tc := range []struct {
		name    string
		sys     fakeSystem
		env     []string
		code    int
		out     []string // in the output
		apt     []string // apt-get's calls, each a prefix of one line of the log
		noInOut string
	}{
		{name: "installed", sys: fakeSystem{uid: 1000, installed: "redis-server 7.2.4"},
			out: []string{"using", "v=7.2.4"}},
		{name: "valkey preferred", sys: fakeSystem{uid: 1000, installed: "valkey-server 8.0.2"},
			out: []string{"valkey-server"}},
		{name: "root", sys: fakeSystem{uid: 0},
			out: []string{"installed", "redis-server"},
			apt: []string{"DEBIAN_FRONTEND=noninteractive -o DPkg::Lock::Timeout=300 update",
				"DEBIAN_FRONTEND=noninteractive -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends redis-server"}},
		{name: "root, valkey package", sys: fakeSystem{uid: 0, valkeyPkg: true, version: "8.0.2"},
			out: []string{"installed", "valkey-server"},
			apt: []string{"DEBIAN_FRONTEND=noninteractive -o DPkg::Lock::Timeout=300 update",
				"DEBIAN_FRONTEND=noninteractive -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends valkey-server"}},
		{name: "sudo without a password", sys: fakeSystem{uid: 1000, sudo: "nopass"},
			out: []string{"installed"},
			apt: []string{"DEBIAN_FRONTEND=noninteractive -o DPkg::Lock::Timeout=300 update",
				"DEBIAN_FRONTEND=noninteractive -o DPkg::Lock::Timeout=300 install"}},
		{name: "sudo wants a password", sys: fakeSystem{uid: 1000, sudo: "password"}, code: 1,
			out: []string{"sudo wants a password but there is no terminal", help}},
		{name: "no sudo", sys: fakeSystem{uid: 1000}, code: 1,
			out: []string{"needs root, and there is no sudo", help}},
		{name: "no apt-get", sys: fakeSystem{uid: 0, noApt: true}, code: 1,
			out: []string{"no apt-get", help}},
		{name: "update fails", sys: fakeSystem{uid: 0, updateRC: 100}, code: 1,
			out: []string{"apt-get update failed", help},
			apt: []string{"DEBIAN_FRONTEND=noninteractive -o DPkg::Lock::Timeout=300 update"}, noInOut: "installed"},
		{name: "installed too old", sys: fakeSystem{uid: 0, installed: "redis-server 6.0.16"}, code: 1,
			out: []string{"too old", "6.0.16", help}},
		{name: "installs too old", sys: fakeSystem{uid: 0, version: "6.0.16"}, code: 1,
			out: []string{"too old", "6.0.16"},
			apt: []string{"DEBIAN_FRONTEND=noninteractive -o DPkg::Lock::Timeout=300 update",
				"DEBIAN_FRONTEND=noninteractive -o DPkg::Lock::Timeout=300 install"}},
		{name: "LOOM_VALKEY_SERVER not executable", sys: fakeSystem{uid: 0}, env: []string{"LOOM_VALKEY_SERVER=/nonexistent/valkey-server"}, code: 1,
			out: []string{"/nonexistent/valkey-server is not an executable file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, out, apt := tc.sys.run(t, tc.env...)
			if code != tc.code {
				t.Errorf("exit code %d, want %d; output:\n%s", code, tc.code, out)
			}
			for _, want := range tc.out {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			if tc.noInOut != "" && strings.Contains(out, tc.noInOut) {
				t.Errorf("output has %q:\n%s", tc.noInOut, out)
			}
			if len(apt) != len(tc.apt) {
				t.Fatalf("apt-get calls:\n%s\nwant:\n%s", strings.Join(apt, "\n"), strings.Join(tc.apt, "\n"))
			}
			for i, want := range tc.apt {
				if !strings.HasPrefix(apt[i], want) {
					t.Errorf("apt-get call %d = %q, want %q...", i, apt[i], want)
				}
			}
		})
	}
}
