package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// report is the Markdown report: what ran where, then one section per phase with its checks.
type report struct {
	cfg      config
	env      *environment
	loadAvg  string // at the start
	sections []*section
}

// newReport starts a report, noting the machine's load average now.
func newReport(cfg config, env *environment) *report {
	return &report{cfg: cfg, env: env, loadAvg: loadAverage()}
}

// section adds a section with title and returns it.
func (r *report) section(title string) *section {
	s := &section{title: title}
	r.sections = append(r.sections, s)
	return s
}

// failed reports whether a check of any section failed.
func (r *report) failed() bool {
	for _, s := range r.sections {
		if s.failures() > 0 {
			return true
		}
	}
	return false
}

// write writes the report.
func (r *report) write(w io.Writer) {
	fmt.Fprintf(w, "# Loom load and fault report\n\n")
	fmt.Fprintf(w, "- Date: %s; run took %.0f s\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"), time.Since(r.env.started).Seconds())
	built := "built from this working tree"
	if r.cfg.loomBin != "" {
		built = "the binary " + r.cfg.loomBin + " (-loom)"
	}
	fmt.Fprintf(w, "- Loom: %s; working tree at %s; %s, %s/%s\n", built, gitDescribe(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(w, "- Store servers: %s (own processes on free loopback ports)\n", r.env.valkeyVer)
	fmt.Fprintf(w, "- Machine: %d cores, shared by `loom serve`, the Valkey server, this load generator and other "+
		"agents' test runs; load average %s at the start, %s at the end. Figures are indicative, not a benchmark.\n",
		runtime.NumCPU(), r.loadAvg, loadAverage())
	fmt.Fprintf(w, "- Flags: -duration %v -warmup %v -concurrency %d -sessions %d -messages %d -outage %v -kill-rounds %d\n\n",
		r.cfg.duration, r.cfg.warmup, r.cfg.concurrency, r.cfg.sessions, r.cfg.messages, r.cfg.outage, r.cfg.killRounds)

	total, failed := 0, 0
	for _, s := range r.sections {
		total += len(s.checks)
		failed += s.failures()
	}
	if failed == 0 {
		fmt.Fprintf(w, "**Result: PASS** (%d checks)\n\n", total)
	} else {
		fmt.Fprintf(w, "**Result: FAIL** (%d of %d checks failed)\n\n", failed, total)
	}
	for _, s := range r.sections {
		s.write(w)
	}
}

// section is one phase's part of the report: Markdown text, then notes and checks.
type section struct {
	title  string
	body   strings.Builder
	notes  []string
	checks []checkResult
}

// checkResult is one check: what it says, and whether it held.
type checkResult struct {
	ok   bool
	text string
}

// printf appends Markdown to the section's text.
func (s *section) printf(format string, args ...any) { fmt.Fprintf(&s.body, format, args...) }

// table appends a Markdown table.
func (s *section) table(header []string, rows [][]string) {
	s.printf("| %s |\n|", strings.Join(header, " | "))
	for range header {
		s.printf(" --- |")
	}
	s.printf("\n")
	for _, row := range rows {
		s.printf("| %s |\n", strings.Join(row, " | "))
	}
	s.printf("\n")
}

// note adds a remark shown under the section's text.
func (s *section) note(format string, args ...any) {
	s.notes = append(s.notes, fmt.Sprintf(format, args...))
}

// check records a check and returns ok.
func (s *section) check(ok bool, format string, args ...any) bool {
	s.checks = append(s.checks, checkResult{ok: ok, text: fmt.Sprintf(format, args...)})
	return ok
}

// fail records a failed check.
func (s *section) fail(format string, args ...any) { s.check(false, format, args...) }

// failures counts the failed checks.
func (s *section) failures() int {
	n := 0
	for _, c := range s.checks {
		if !c.ok {
			n++
		}
	}
	return n
}

func (s *section) write(w io.Writer) {
	fmt.Fprintf(w, "## %s\n\n%s", s.title, s.body.String())
	for _, n := range s.notes {
		fmt.Fprintf(w, "- %s\n", n)
	}
	if len(s.notes) > 0 {
		fmt.Fprintln(w)
	}
	if len(s.checks) == 0 {
		return
	}
	fmt.Fprintf(w, "Checks:\n\n")
	for _, c := range s.checks {
		mark := "PASS"
		if !c.ok {
			mark = "**FAIL**"
		}
		fmt.Fprintf(w, "- %s %s\n", mark, c.text)
	}
	fmt.Fprintln(w)
}

// loadAverage returns the 1, 5 and 15 minute load averages, or "unknown".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " / ")
}

// gitDescribe returns the commit the working tree is on, marked when it has changes, or "unknown".
func gitDescribe() string {
	out, err := exec.Command("git", "describe", "--always", "--dirty").Output()
	if err != nil {
		return "commit unknown"
	}
	return "commit " + strings.TrimSpace(string(out))
}
