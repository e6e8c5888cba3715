package store

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/rankd/rankd/internal/testenv/testseed"
)

func TestSlot(t *testing.T) {
	tests := []struct {
		key  string
		want int
	}{
		{"foo", 12182},
		{"123456789", 12739}, // CRC-16/XMODEM check value 0x31C3
		{"somekey", 11058},
		{"foo{hash_tag}", 2515},
		{"bar{hash_tag}", 2515},
		{"{user1000}.following", Slot("user1000")},
		{"{user1000}.followers", Slot("user1000")},
		{"foo{}{bar}", Slot("foo{}{bar}")}, // empty tag: whole key
		{"foo{{bar}}zap", Slot("{bar")},
		{"foo{bar}{zap}", Slot("bar")},
		{"{", Slot("{")},
		{"", 0},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			if got := Slot(tt.key); got != tt.want {
				t.Errorf("Slot(%q) = %d, want %d", tt.key, got, tt.want)
			}
		})
	}
	if Slot("foo{}{bar}") == Slot("bar") {
		t.Error("empty hash tag must hash the whole key")
	}
}

func TestTag(t *testing.T) {
	tests := []struct {
		name  string
		board string
		dims  []string
		want  string
	}{
		{"no dims", "anchor_total", nil, "anchor_total"},
		{"one dim", "anchor_hot_zone_30m", []string{"eu"}, "anchor_hot_zone_30m|eu"},
		{"two dims", "b", []string{"eu", "room-7"}, "b|eu,room-7"},
		{"empty value", "b", []string{""}, "b|"},
		{"two empty values", "b", []string{"", ""}, "b|,"},
		{"separators", "b", []string{"a:b|c,d"}, "b|a%3Ab%7Cc%2Cd"},
		{"braces", "b", []string{"{x}"}, "b|%7Bx%7D"},
		{"percent", "b", []string{"100%"}, "b|100%25"},
		{"space and control", "b", []string{" \x00\x7f"}, "b|%20%00%7F"},
		{"utf-8", "b", []string{"é"}, "b|%C3%A9"},
		{"invalid utf-8", "b", []string{"\xff"}, "b|%FF"},
		{"printable kept", "b", []string{"a-Z_~!\"#$&'()*+./;<=>?@[\\]^`"}, "b|a-Z_~!\"#$&'()*+./;<=>?@[\\]^`"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Tag(tt.board, tt.dims)
			if got != tt.want {
				t.Fatalf("Tag(%q, %q) = %q, want %q", tt.board, tt.dims, got, tt.want)
			}
			board, dims, err := ParseTag(got)
			if err != nil || board != tt.board || !slices.Equal(dims, tt.dims) {
				t.Errorf("ParseTag(%q) = %q, %q, %v", got, board, dims, err)
			}
		})
	}
}

func TestParseTagErrors(t *testing.T) {
	for _, tag := range []string{
		"", "|eu", "b|%4", "b|%", "b|%zz", "b|%3a", "b|%41", "b|a b", "b|{", "b|}", "b:x", "b|x|y", "b|é",
	} {
		t.Run(tag, func(t *testing.T) {
			if board, dims, err := ParseTag(tag); err == nil {
				t.Errorf("ParseTag(%q) = %q, %q, want error", tag, board, dims)
			}
		})
	}
}

func TestKey(t *testing.T) {
	tests := []struct {
		prefix, tag, kind, period string
		want                      string
	}{
		{"rankd", "anchor_hot_30m", "z", "20261121T1330", "rankd:{anchor_hot_30m}:z:20261121T1330"},
		{"rankd", "b|eu", "p", "2026W47", "rankd:{b|eu}:p:2026W47"},
		{"rankd", "anchor_total", "z", "", "rankd:{anchor_total}:z"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := Key(tt.prefix, tt.tag, tt.kind, tt.period); got != tt.want {
				t.Errorf("Key() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestValidatePrefix(t *testing.T) {
	tests := []struct {
		prefix string
		ok     bool
	}{
		{"rankd", true},
		{"app:rankd", true},
		{"", false},
		{"a{b", false},
		{"a}b", false},
	}
	for _, tt := range tests {
		t.Run(tt.prefix, func(t *testing.T) {
			if err := ValidatePrefix(tt.prefix); (err == nil) != tt.ok {
				t.Errorf("ValidatePrefix(%q) = %v, want ok %v", tt.prefix, err, tt.ok)
			}
		})
	}
}

// randomDim draws a dims value from pieces that stress the escaping.
func randomDim(rng *rand.Rand) string {
	pieces := []string{"", "{", "}", ":", "|", ",", "%", "%25", "%7B", "a", "Z9", " ", "\x00", "\xff", "\xc3", "é", "日本", "\U0001F600", "~"}
	var sb strings.Builder
	for n := rng.IntN(5); n > 0; n-- {
		if rng.IntN(6) == 0 {
			sb.WriteByte(byte(rng.IntN(256)))
			continue
		}
		sb.WriteString(pieces[rng.IntN(len(pieces))])
	}
	return sb.String()
}

func TestTagProperties(t *testing.T) {
	seed, rng := testseed.Rand(t)
	seen := map[string][]string{}
	kinds := []string{"z", "p", "s", "h", "head", "{x}", ""}
	periods := []string{"", "20261121", "20261121T1330", "2026W47", "202611", "all", "}{"}
	for range 100_000 {
		dims := make([]string, rng.IntN(4))
		for i := range dims {
			dims[i] = randomDim(rng)
		}
		tag := Tag("board_1", dims)
		checkTagBytes(t, seed, dims, tag)
		board, got, err := ParseTag(tag)
		if err != nil || board != "board_1" || !slices.Equal(got, dims) {
			t.Fatalf("seed %d: ParseTag(Tag(%q)) = %q, %q, %v", seed, dims, board, got, err)
		}
		if prev, ok := seen[tag]; ok && !slices.Equal(prev, dims) {
			t.Fatalf("seed %d: Tag(%q) == Tag(%q) == %q", seed, prev, dims, tag)
		}
		seen[tag] = dims
		want := Slot("{" + tag + "}")
		for range 3 {
			kind, period := kinds[rng.IntN(len(kinds))], periods[rng.IntN(len(periods))]
			if s := Slot(Key("rankd", tag, kind, period)); s != want {
				t.Fatalf("seed %d: Slot(Key(%q, %q, %q)) = %d, want %d", seed, tag, kind, period, s, want)
			}
		}
	}
}

// checkTagBytes checks that tag holds only printable ASCII, no '{', '}' or
// ':', '|' and ',' only as separators, and '%' only before two uppercase hex
// digits.
func checkTagBytes(t *testing.T, seed int64, dims []string, tag string) {
	t.Helper()
	for i := 0; i < len(tag); i++ {
		c := tag[i]
		bad := c < 0x21 || c > 0x7E || c == '{' || c == '}' || c == ':'
		if c == '%' {
			bad = i+2 >= len(tag) || !isUpperHex(tag[i+1]) || !isUpperHex(tag[i+2])
		}
		if bad {
			t.Fatalf("seed %d: Tag(%q) = %q has a forbidden byte at %d", seed, dims, tag, i)
		}
	}
	if strings.Count(tag, "|") != min(len(dims), 1) || strings.Count(tag, ",") != max(len(dims)-1, 0) {
		t.Fatalf("seed %d: Tag(%q) = %q: '|' and ',' must only separate", seed, dims, tag)
	}
}

func isUpperHex(c byte) bool { return '0' <= c && c <= '9' || 'A' <= c && c <= 'F' }

func TestSlotTag(t *testing.T) {
	for slot := range NumSlots {
		s := SlotTag(slot)
		if len(s) == 0 || len(s) > 4 {
			t.Fatalf("SlotTag(%d) = %q, want 1-4 bytes", slot, s)
		}
		if got := Slot("{" + s + "}"); got != slot {
			t.Fatalf("Slot({%s}) = %d, want %d", s, got, slot)
		}
		if got := Slot(Key("rankd", s, "seen", "")); got != slot {
			t.Fatalf("Slot(Key(%q)) = %d, want %d", s, got, slot)
		}
		if b, dims, err := ParseTag(s); err != nil || b != s || dims != nil {
			t.Fatalf("SlotTag(%d) = %q is not a plain tag: %v", slot, s, err)
		}
	}
}

func BenchmarkSlot(b *testing.B) {
	key := Key("rankd", Tag("anchor_hot_zone_30m", []string{"eu-west"}), "z", "20261121T1330")
	for b.Loop() {
		_ = Slot(key)
	}
}

func ExampleKey() {
	tag := Tag("anchor_hot_zone_30m", []string{"eu:west"})
	fmt.Println(Key("rankd", tag, "z", "20261121T1330"))
	// Output: rankd:{anchor_hot_zone_30m|eu%3Awest}:z:20261121T1330
}
