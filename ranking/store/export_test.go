package store

// SetNonce makes the Applies that follow use nonce n (so call IDs repeat,
// as when a client resends a pipeline); it returns what undoes it.
func SetNonce(n string) (undo func()) {
	orig := newNonce
	newNonce = func() string { return n }
	return func() { newNonce = orig }
}
