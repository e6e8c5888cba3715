package testenv

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
)

// maxNameLen bounds the part of a name taken from the test name.
const maxNameLen = 48

var (
	// runID tells apart test binaries that share a server (packages run in
	// parallel against REDIS_ADDR or KAFKA_BROKERS).
	runID   = fmt.Sprintf("%06x", rand.Uint32()&0xffffff)
	nameSeq atomic.Int64
)

// Prefix returns a key prefix unique to this call: t's name lowercased with
// every character outside [a-z0-9_] replaced by '_', a token of this test
// binary and a counter, such as "testapply_sub_case_1f2e3d_7". Tests that
// share a server put it in front of every key they use, so they never
// collide. It contains only [a-z0-9_].
func Prefix(t testing.TB) string {
	t.Helper()
	return uniqueName(t.Name())
}

func uniqueName(testName string) string {
	return fmt.Sprintf("%s_%s_%d", sanitize(testName), runID, nameSeq.Add(1))
}

// sanitize maps s to [a-z0-9_], collapsing runs of '_' and keeping at most
// maxNameLen characters.
func sanitize(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "_"):
			b.WriteByte('_')
		}
	}
	out := strings.TrimRight(b.String(), "_")
	if len(out) > maxNameLen {
		out = strings.TrimRight(out[:maxNameLen], "_")
	}
	if out == "" {
		out = "t"
	}
	return out
}
