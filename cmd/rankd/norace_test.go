//go:build !race

package main

// raceEnabled reports whether the tests run with -race; the rankd binary
// they start is built the same way.
const raceEnabled = false
