//go:build !race

package sqlite_test

// openChildBusyDivisor divides the busy timeout of TestOpen_ManyProcessesAtOnce's children: see
// openChildBusy.
const openChildBusyDivisor = 5
