package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/redis/go-redis/v9"
	"github.com/vmihailenco/msgpack/v5"
)

// How an apply call's arguments travel: its first ARGV names the encoding
// of the rest (apply.lua decodes it first).
//
// Redis hands a script every ARGV element as a string, and a script that
// wants a number parses it with tonumber, a strtod: about 0.55 µs of Redis
// CPU per number, where one msgpack array that the script decodes with
// cmsgpack.unpack costs about 0.13 µs per number (docs/benchmarks.md).
// An apply call carries several numbers per event (a folded member's sum,
// magnitude and tie; an update's value and time), so calls send
// argsMsgpack to servers whose scripts have cmsgpack (Redis and its
// forks), and argsPlain, the arguments as ARGV strings, to others
// (miniredis, which `rankd dev` runs). A probe decides, once per store
// (argEncoding).
const (
	argsMsgpack = "m" // ARGV[2] is one msgpack array of the arguments: numbers arrive as Lua numbers
	argsPlain   = "a" // ARGV[2..] are the arguments, as strings
)

// decimal is an integer that a script gets as its decimal digits, in
// either encoding: a dedupe fingerprint, which a Lua number (a double)
// cannot hold. Plain ARGV renders it through MarshalBinary.
type decimal int64

// MarshalBinary renders d for go-redis (argsPlain).
func (d *decimal) MarshalBinary() ([]byte, error) { return strconv.AppendInt(nil, int64(*d), 10), nil }

// maxLuaInt is the largest magnitude a Lua number holds exactly; a larger
// integer is sent as its digits (the script's tonumber then reads it as
// it always did).
const maxLuaInt = 1 << 53

// packArgs appends args, as one msgpack array, to dst. Strings (string,
// *string, []byte) and decimals go as strings; integers as msgpack
// integers, or as strings beyond maxLuaInt.
func packArgs(dst []byte, args []any) ([]byte, error) {
	w := appendWriter{b: dst}
	enc := msgpack.GetEncoder()
	defer msgpack.PutEncoder(enc)
	enc.Reset(&w)
	var digits [20]byte
	// (cmsgpack reads no bin format: bytes go as str; the encoder copies
	// them before digits changes)
	str := func(b []byte) error { return enc.EncodeString(unsafe.String(unsafe.SliceData(b), len(b))) }
	num := func(n int64) error {
		if n > maxLuaInt || n < -maxLuaInt {
			return str(strconv.AppendInt(digits[:0], n, 10))
		}
		return enc.EncodeInt(n)
	}
	if err := enc.EncodeArrayLen(len(args)); err != nil {
		return nil, err
	}
	for i, a := range args {
		var err error
		switch v := a.(type) {
		case string:
			err = enc.EncodeString(v)
		case *string:
			err = enc.EncodeString(*v)
		case []byte:
			err = str(v)
		case *decimal:
			err = str(strconv.AppendInt(digits[:0], int64(*v), 10))
		case int:
			err = num(int64(v))
		case *int:
			err = num(int64(*v))
		case int64:
			err = num(v)
		case *int64:
			err = num(*v)
		case uint:
			if v > math.MaxInt64 {
				return nil, fmt.Errorf("store: argument %d: %d overflows", i, v)
			}
			err = num(int64(v))
		default:
			return nil, fmt.Errorf("store: argument %d: %T has no encoding", i, a)
		}
		if err != nil {
			return nil, err
		}
	}
	return w.b, nil
}

// appendWriter is an io.Writer that appends to b.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// WriteByte lets msgpack write single bytes without a slice.
func (w *appendWriter) WriteByte(c byte) error {
	w.b = append(w.b, c)
	return nil
}

// argEncoding is the encoding a store's apply calls use, shared by its
// generation views: decided by probe on the first call, or forced
// (WithPlainArgs).
type argEncoding struct {
	mu    sync.Mutex
	mode  atomic.Value // string: argsMsgpack or argsPlain, once known
	plain bool         // forced plain
}

// probeScript answers "ok" where scripts have cmsgpack.
var probeScript = redis.NewScript(`return cmsgpack.unpack(ARGV[1])[2]`)

// probeBlob is the msgpack array [1, "ok"].
var probeBlob = []byte{0x92, 0x01, 0xa2, 'o', 'k'}

// get returns the encoding of apply calls, probing the server the first
// time. A probe that fails for want of Redis (unreachable, loading, busy)
// or of rankd's rights returns the error and decides nothing (the apply
// fails as it would have, and is retried); the script failing means no
// cmsgpack: plain.
func (e *argEncoding) get(ctx context.Context, rdb redis.Scripter) (string, error) {
	if m, ok := e.mode.Load().(string); ok {
		return m, nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if m, ok := e.mode.Load().(string); ok {
		return m, nil
	}
	mode := argsPlain
	if !e.plain {
		got, err := probeScript.Eval(ctx, rdb, nil, probeBlob).Result()
		var rerr redis.Error
		switch {
		case err == nil && got == "ok":
			mode = argsMsgpack
		case err != nil && (!errors.As(err, &rerr) || IsUnavailable(err) || IsAuthFailure(err)):
			return "", fmt.Errorf("probing the script libraries: %w", err)
		}
	}
	e.mode.Store(mode)
	return mode, nil
}

// WithPlainArgs makes apply calls send their arguments as plain ARGV
// strings even where scripts have cmsgpack (tests compare the two).
func WithPlainArgs() Option { return func(s *Store) { s.enc.plain = true } }

// Args returns the encoding apply calls use ("msgpack" or "plain"; ""
// before the first call).
func (s *Store) Args() string {
	switch m, _ := s.enc.mode.Load().(string); m {
	case argsMsgpack:
		return "msgpack"
	case argsPlain:
		return "plain"
	}
	return ""
}
