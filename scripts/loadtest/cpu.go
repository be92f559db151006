package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is the unit of /proc/PID/stat's CPU times (USER_HZ, 100 on every Linux platform Go supports).
const clockTicks = 100

// cpuTime returns the user and system CPU time process pid has used, from /proc/PID/stat, or 0 where there
// is no /proc.
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces; the fields after it are plain.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64) // field 14 of the whole line
	stime, err2 := strconv.ParseInt(fields[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(utime+stime) * time.Second / clockTicks
}

// cpuMeter measures how many cores a few processes kept busy over an interval.
type cpuMeter struct {
	names []string
	pids  []int
	start []time.Duration
	at    time.Time
}

// startCPU starts measuring the processes, named pairwise: name, pid, name, pid...
func startCPU(names []string, pids []int) *cpuMeter {
	m := &cpuMeter{names: names, pids: pids, at: time.Now()}
	for _, pid := range pids {
		m.start = append(m.start, cpuTime(pid))
	}
	return m
}

// String reports the cores each process kept busy since the start, such as "loom 1.20, valkey 0.30".
func (m *cpuMeter) String() string {
	wall := time.Since(m.at)
	var parts []string
	for i, pid := range m.pids {
		used := cpuTime(pid) - m.start[i]
		if used <= 0 && m.start[i] == 0 {
			return "unknown (no /proc)"
		}
		parts = append(parts, fmt.Sprintf("%s %.2f", m.names[i], used.Seconds()/wall.Seconds()))
	}
	return strings.Join(parts, ", ")
}
