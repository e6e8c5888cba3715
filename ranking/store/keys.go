package store

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/rankd/rankd/ranking"
)

// Redis keys have the layout
//
//	<prefix>:{<tag>}:<kind>:<period-id>
//
// The tag is the Redis Cluster hash tag: every key of one board and dims
// tuple (all periods and kinds) hashes to the same slot, so one Lua script can
// update them atomically. The tag is the board name, followed for boards with
// dims by "|" and the escaped dims values joined by ",". Escaping
// percent-encodes (as %XX, uppercase hex) every byte outside 0x21..0x7E and
// each of { } : | , % so that a tag never contains them; distinct (board,
// dims) pairs therefore give distinct tags, and no value can move a key to
// another slot.

// NumSlots is the number of Redis Cluster hash slots.
const NumSlots = 16384

// Tag returns the hash tag of board and dims values; see the key layout
// above. An empty dims gives the board name; empty values are allowed.
func Tag(board string, dims []string) string {
	var sb strings.Builder
	n := len(board) + len(dims) // without escapes: one allocation
	for _, d := range dims {
		n += len(d)
	}
	sb.Grow(n)
	escapeTo(&sb, board)
	for i, d := range dims {
		if i == 0 {
			sb.WriteByte('|')
		} else {
			sb.WriteByte(',')
		}
		escapeTo(&sb, d)
	}
	return sb.String()
}

// ParseTag is the inverse of Tag. It accepts only tags that Tag produces
// (canonical escapes), so Tag(ParseTag(s)) == s whenever err is nil.
func ParseTag(tag string) (board string, dims []string, err error) {
	name, rest, hasDims := strings.Cut(tag, "|")
	if board, err = unescape(name); err != nil {
		return "", nil, fmt.Errorf("tag %q: board: %w", tag, err)
	}
	if board == "" {
		return "", nil, fmt.Errorf("tag %q: empty board", tag)
	}
	if !hasDims {
		return board, nil, nil
	}
	for v := range strings.SplitSeq(rest, ",") {
		d, err := unescape(v)
		if err != nil {
			return "", nil, fmt.Errorf("tag %q: dims: %w", tag, err)
		}
		dims = append(dims, d)
	}
	return board, dims, nil
}

// Key returns prefix+":{"+tag+"}:"+kind+":"+period, without the final
// ":"+period when period is empty. The prefix must pass ValidatePrefix.
func Key(prefix, tag, kind, period string) string {
	k := prefix + ":{" + tag + "}:" + kind
	if period != "" {
		k += ":" + period
	}
	return k
}

// KeyPatterns describes the keys of board b under prefix, with each dim as
// <name> and the period as <period> (`rankd config check`).
func KeyPatterns(prefix string, b *ranking.Board) string {
	placeholders := make([]string, len(b.Dims))
	for i, d := range b.Dims {
		placeholders[i] = "<" + d + ">"
	}
	tag := Tag(b.Name, placeholders)
	switch b.Window {
	case ranking.WindowTotal:
		return Key(prefix, tag, KindTotal, PeriodAll)
	case ranking.WindowRolling:
		return Key(prefix, tag, KindRolling, "<period>") + " (window sums), " + Key(prefix, tag, KindPeriod, "<period>") + " (periods)"
	default:
		return Key(prefix, tag, KindPeriod, "<period>")
	}
}

// ValidatePrefix checks that keys built with prefix hash by their tag: the
// prefix must be non-empty and contain no '{' or '}'.
func ValidatePrefix(prefix string) error {
	if prefix == "" {
		return errors.New("key prefix is empty")
	}
	if strings.ContainsAny(prefix, "{}") {
		return fmt.Errorf("key prefix %q contains '{' or '}'", prefix)
	}
	return nil
}

// Slot returns the Redis Cluster hash slot of key: CRC16 (XMODEM) of the hash
// tag — the bytes between the first '{' and the next '}' when non-empty — or
// else of the whole key, modulo 16384.
func Slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key)) % NumSlots
}

// SlotTag returns a short ASCII alphanumeric string s with
// Slot("{"+s+"}") == slot, for placing per-slot keys (e.g. dedupe) in a given
// slot. It panics if slot is outside [0, 16384).
func SlotTag(slot int) string {
	return slotTags()[slot]
}

// slotTags is the shortest alphanumeric string of each slot, found once by
// enumerating strings in length-then-alphabet order.
var slotTags = sync.OnceValue(func() *[NumSlots]string {
	const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	var t [NumSlots]string
	left := NumSlots
	level := []string{""}
	for left > 0 {
		next := make([]string, 0, len(level)*len(alphabet))
		for _, p := range level {
			for i := 0; i < len(alphabet); i++ {
				s := p + alphabet[i:i+1]
				next = append(next, s)
				if slot := int(crc16(s)) % NumSlots; t[slot] == "" {
					t[slot] = s
					left--
				}
			}
		}
		level = next
	}
	return &t
})

// escapeTo writes s to sb, percent-encoding the bytes a tag must not contain.
func escapeTo(sb *strings.Builder, s string) {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if needsEscape(c) {
			sb.WriteByte('%')
			sb.WriteByte(hex[c>>4])
			sb.WriteByte(hex[c&0xF])
		} else {
			sb.WriteByte(c)
		}
	}
}

func needsEscape(c byte) bool {
	if c < 0x21 || c > 0x7E {
		return true
	}
	switch c {
	case '{', '}', ':', '|', ',', '%':
		return true
	}
	return false
}

// unescape decodes one escaped component, rejecting raw bytes that must be
// escaped, escapes of bytes that need none, and lowercase or bad hex.
func unescape(s string) (string, error) {
	if !strings.Contains(s, "%") {
		for i := 0; i < len(s); i++ {
			if needsEscape(s[i]) {
				return "", fmt.Errorf("unescaped byte %#02x", s[i])
			}
		}
		return s, nil
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' {
			if needsEscape(c) {
				return "", fmt.Errorf("unescaped byte %#02x", c)
			}
			b = append(b, c)
			continue
		}
		if i+2 >= len(s) {
			return "", errors.New("truncated escape")
		}
		hi, ok1 := unhex(s[i+1])
		lo, ok2 := unhex(s[i+2])
		if !ok1 || !ok2 {
			return "", fmt.Errorf("bad escape %q", s[i:i+3])
		}
		c = hi<<4 | lo
		if !needsEscape(c) {
			return "", fmt.Errorf("needless escape %q", s[i:i+3])
		}
		b = append(b, c)
		i += 2
	}
	return string(b), nil
}

// unhex decodes an uppercase hex digit.
func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0), the checksum
// of Redis Cluster key slots.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc = crc<<8 ^ crcTable[byte(crc>>8)^s[i]]
	}
	return crc
}

// crcTable[b] is the CRC-16/XMODEM of the single byte b.
var crcTable = func() (t [256]uint16) {
	for b := range t {
		crc := uint16(b) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[b] = crc
	}
	return t
}()
