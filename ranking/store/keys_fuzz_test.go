package store

import (
	"slices"
	"strings"
	"testing"
)

// fuzzDims decodes a dims list from fuzz bytes: repeated (length byte,
// that many bytes), at most 8 values; empty input is no dims. Every list
// of up to 8 values of up to 255 bytes has an encoding.
func fuzzDims(b []byte) []string {
	var dims []string
	for len(b) > 0 && len(dims) < 8 {
		n := min(int(b[0]), len(b)-1)
		dims = append(dims, string(b[1:1+n]))
		b = b[1+n:]
	}
	return dims
}

// encodeDims is the inverse of fuzzDims, for seeds.
func encodeDims(dims ...string) []byte {
	var b []byte
	for _, d := range dims {
		b = append(b, byte(len(d)))
		b = append(b, d...)
	}
	return b
}

// FuzzTag fuzzes pairs of (board, dims) and checks the key escaping: a tag
// holds only printable ASCII without '{', '}' or ':' (it is a Redis
// Cluster hash tag), '|' and ',' only as separators and '%' only in
// uppercase escapes; ParseTag inverts Tag (boards are non-empty: an empty
// board's tag is refused); distinct pairs give distinct tags; and every key
// built on the tag with a valid prefix hashes to the tag's slot, whatever
// the kind and period. The seeds run in the default suite; explore with
//
//	go test ./ranking/store -run '^$' -fuzz '^FuzzTag$' -fuzztime 1m
func FuzzTag(f *testing.F) {
	f.Add("anchor_hot_zone_30m", encodeDims("eu"), "anchor_hot_zone_30m", encodeDims("eu", ""), "rankd", "z", "20261121T1330")
	f.Add("b", encodeDims(""), "b", []byte(nil), "app:rankd", "p", "")
	f.Add("b", encodeDims("", ""), "b", encodeDims(""), "rankd", "head", "2026W47")
	f.Add("b", encodeDims("a,b"), "b", encodeDims("a", "b"), "rankd", "z", "")
	f.Add("b", encodeDims("a|b"), "b|a", encodeDims("b"), "rankd", "z", "")
	f.Add("b|x", []byte(nil), "b", encodeDims("x"), "r", "{x}", "}{")
	f.Add("b", encodeDims("%7B"), "b", encodeDims("{"), "rankd", "z", "")
	f.Add("b", encodeDims("%"), "b", encodeDims("%25"), "rankd", "z", "")
	f.Add("b", encodeDims("{a:b|c}", " \x00\x7f", "\xff\xc3", "é日本😀"), "b", encodeDims("~"), "rankd", "s", "all")
	f.Add("", []byte(nil), "", encodeDims(""), "rankd", "z", "")
	f.Add("{}", encodeDims("}{"), "%7B%7D", encodeDims("%7D%7B"), "a{b", "z", "")
	f.Fuzz(func(t *testing.T, board1 string, dims1 []byte, board2 string, dims2 []byte, prefix, kind, period string) {
		d1, d2 := fuzzDims(dims1), fuzzDims(dims2)
		tag1, tag2 := Tag(board1, d1), Tag(board2, d2)
		for _, c := range []struct {
			board string
			dims  []string
			tag   string
		}{{board1, d1, tag1}, {board2, d2, tag2}} {
			checkFuzzTag(t, c.board, c.dims, c.tag)
			board, dims, err := ParseTag(c.tag)
			switch {
			case c.board == "":
				if err == nil {
					t.Fatalf("ParseTag(Tag(%q, %q) = %q) = %q, %q: want an empty-board error", c.board, c.dims, c.tag, board, dims)
				}
			case err != nil || board != c.board || !slices.Equal(dims, c.dims):
				t.Fatalf("ParseTag(Tag(%q, %q) = %q) = %q, %q, %v", c.board, c.dims, c.tag, board, dims, err)
			}
			if ValidatePrefix(prefix) != nil || c.tag == "" {
				continue
			}
			key := Key(prefix, c.tag, kind, period)
			if got, want := Slot(key), Slot("{"+c.tag+"}"); got != want || want != int(crc16(c.tag))%NumSlots {
				t.Fatalf("Slot(Key(%q, %q, %q, %q) = %q) = %d, want %d (the tag's slot)", prefix, c.tag, kind, period, key, got, want)
			}
		}
		same := board1 == board2 && slices.Equal(d1, d2)
		if (tag1 == tag2) != same {
			t.Fatalf("Tag(%q, %q) = %q, Tag(%q, %q) = %q: equal tags %v, equal pairs %v",
				board1, d1, tag1, board2, d2, tag2, tag1 == tag2, same)
		}
	})
}

// FuzzParseTag checks that ParseTag accepts exactly the canonical tags:
// whatever it accepts, Tag gives back byte for byte; whatever it refuses
// has no (non-empty board, dims) pair that Tag maps to it (found with a
// lenient decoder, which recovers the pair of any canonical tag).
//
//	go test ./ranking/store -run '^$' -fuzz '^FuzzParseTag$' -fuzztime 1m
func FuzzParseTag(f *testing.F) {
	for _, s := range []string{
		"anchor_total", "b|eu", "b|eu,room-7", "b|", "b|,", "b|a%3Ab%7Cc%2Cd", "b|%7Bx%7D", "b|100%25",
		"b|%20%00%7F", "b|%C3%A9", "b|%FF", "", "|eu", "b|%4", "b|%", "b|%zz", "b|%3a", "b|%41", "b|a b",
		"b|{", "b|}", "b:x", "b|x|y", "b|é", "%62", "%7C", "b%7C|x", "0", "zZ9~",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		board, dims, err := ParseTag(s)
		if err == nil {
			if board == "" {
				t.Fatalf("ParseTag(%q): empty board accepted", s)
			}
			if back := Tag(board, dims); back != s {
				t.Fatalf("ParseTag(%q) = %q, %q; Tag gives %q", s, board, dims, back)
			}
			checkFuzzTag(t, board, dims, s)
			return
		}
		lb, ld := lenientParseTag(s)
		if lb != "" && Tag(lb, ld) == s {
			t.Fatalf("ParseTag(%q) refused the tag of (%q, %q): %v", s, lb, ld, err)
		}
	})
}

// checkFuzzTag checks that tag, the tag of board and dims, holds only
// printable ASCII without '{', '}' or ':', '%' only before two uppercase hex
// digits, and '|' and ',' only as the separators of dims.
func checkFuzzTag(t *testing.T, board string, dims []string, tag string) {
	t.Helper()
	for i := 0; i < len(tag); i++ {
		c := tag[i]
		bad := c < 0x21 || c > 0x7E || c == '{' || c == '}' || c == ':'
		if c == '%' {
			bad = i+2 >= len(tag) || !isUpperHex(tag[i+1]) || !isUpperHex(tag[i+2])
		}
		if bad {
			t.Fatalf("Tag(%q, %q) = %q has a forbidden byte at %d", board, dims, tag, i)
		}
	}
	if strings.Count(tag, "|") != min(len(dims), 1) || strings.Count(tag, ",") != max(len(dims)-1, 0) {
		t.Fatalf("Tag(%q, %q) = %q: '|' and ',' must only separate", board, dims, tag)
	}
}

// lenientParseTag splits s like a tag and decodes every %XX with hex
// digits of either case, keeping any other byte.
func lenientParseTag(s string) (board string, dims []string) {
	unhexAny := func(c byte) (byte, bool) {
		switch {
		case '0' <= c && c <= '9':
			return c - '0', true
		case 'a' <= c && c <= 'f':
			return c - 'a' + 10, true
		case 'A' <= c && c <= 'F':
			return c - 'A' + 10, true
		}
		return 0, false
	}
	dec := func(s string) string {
		var b []byte
		for i := 0; i < len(s); i++ {
			if s[i] == '%' && i+2 < len(s) {
				hi, ok1 := unhexAny(s[i+1])
				lo, ok2 := unhexAny(s[i+2])
				if ok1 && ok2 {
					b = append(b, hi<<4|lo)
					i += 2
					continue
				}
			}
			b = append(b, s[i])
		}
		return string(b)
	}
	name, rest, hasDims := strings.Cut(s, "|")
	if !hasDims {
		return dec(name), nil
	}
	for _, v := range strings.Split(rest, ",") {
		dims = append(dims, dec(v))
	}
	return dec(name), dims
}
