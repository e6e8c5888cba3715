package store

import "time"

// SetNonce makes the Applies that follow use nonce n (so call IDs repeat,
// as when a client resends a pipeline); it returns what undoes it.
func SetNonce(n string) (undo func()) {
	orig := newNonce
	newNonce = func() string { return n }
	return func() { newNonce = orig }
}

// SetReplanPause sets how long apply calls go per update after a packed
// call gave up; it returns what undoes it.
func SetReplanPause(d time.Duration) (undo func()) {
	orig := replanPause
	replanPause = d
	return func() { replanPause = orig }
}
