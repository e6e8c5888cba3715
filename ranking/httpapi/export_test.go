package httpapi

import (
	"net/http"

	"github.com/rankd/rankd/ranking/store"
)

// SetCostObserver makes the handler h (from New) call f with the estimate
// and the counted work of every read that goes to Redis, after it.
func SetCostObserver(h http.Handler, f func(route string, estimate, counted store.Counts)) {
	h.(*api).s.observe = f
}

// Idle returns the connections l counts idle now.
func (l *ConnLimit) Idle() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.idle.Len()
}
