//go:build !race

package chaos

// raceEnabled reports whether the tests run with -race; rankd is built the
// same way.
const raceEnabled = false
