//go:build race

package testenv

// RaceEnabled reports whether the test binary was built with -race (rankd,
// the broker and tools are built the same way, reusing the build cache).
const RaceEnabled = true
