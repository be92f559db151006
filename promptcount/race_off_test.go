//go:build !race

package promptcount_test

const raceEnabled = false
