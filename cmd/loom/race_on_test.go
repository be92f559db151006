//go:build race

package main

// raceEnabled says the race detector is on: TestBuild_WithoutCgoIsStatic, which builds the command as
// another process and reads the binary, is left to the runs without it.
const raceEnabled = true
