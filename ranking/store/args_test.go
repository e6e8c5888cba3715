package store

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// TestPackArgs decodes what packArgs encodes: every argument type an
// apply call holds, in order, with strings and decimals as strings and
// integers as integers, but beyond 2^53 (what a Lua number holds) as
// their digits.
func TestPackArgs(t *testing.T) {
	s, n, n64, fp := "member", 7, int64(-1_700_000_000_000), decimal(-9_123_456_789_012_345_678)
	args := []any{"prefix", &s, []byte("bytes"), 3, &n, int64(1) << 53, &n64, uint(24), &fp,
		int64(1)<<53 + 1, -(int64(1)<<53 + 1), strings.Repeat("x", 300), ""}
	blob, err := packArgs([]byte("keep"), args)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(blob, []byte("keep")) {
		t.Fatalf("packArgs did not append to dst: %q", blob[:8])
	}
	var got []any
	if err := msgpack.Unmarshal(blob[4:], &got); err != nil {
		t.Fatal(err)
	}
	want := []any{"prefix", "member", "bytes", int64(3), int64(7), int64(1) << 53, int64(-1_700_000_000_000), int64(24),
		"-9123456789012345678", "9007199254740993", "-9007199254740993", strings.Repeat("x", 300), ""}
	if len(got) != len(want) {
		t.Fatalf("decoded %d values, want %d: %v", len(got), len(want), got)
	}
	for i := range want {
		g := got[i]
		// msgpack decodes small integers to their smallest type
		if rv := reflect.ValueOf(g); rv.CanInt() {
			g = rv.Int()
		} else if rv.CanUint() {
			g = int64(rv.Uint())
		}
		if g != want[i] {
			t.Errorf("value %d: got %#v (%T), want %#v", i, got[i], got[i], want[i])
		}
	}
	// cmsgpack reads no bin format: bytes must go as str
	if !bytes.Contains(blob, []byte("\xa5bytes")) {
		t.Errorf("[]byte not encoded as a msgpack str (fixstr a5)")
	}
	if _, err := packArgs(nil, []any{1.5}); err == nil {
		t.Errorf("packArgs took a float64")
	}
}
