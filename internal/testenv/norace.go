//go:build !race

package testenv

// raceEnabled reports whether the test binary was built with -race; the
// broker process is built the same way so that it reuses the build cache.
const raceEnabled = false
