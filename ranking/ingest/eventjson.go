package ingest

import (
	"errors"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// A strict JSON scanner for event messages: it validates the whole message
// like encoding/json (RFC 8259) but materializes only the top-level members,
// as byte spans of the message, so that Decode converts just the declared
// fields. FuzzDecode checks it against encoding/json.

// jsonKind is the type of a JSON value.
type jsonKind uint8

const (
	jsonNull jsonKind = iota
	jsonString
	jsonNumber
	jsonBool
	jsonObject
	jsonArray
)

func (k jsonKind) String() string {
	return [...]string{"null", "string", "number", "boolean", "object", "array"}[k]
}

// jsonValue is one scanned value: its span [start, end) in the message b
// (raw). For strings the span is the text between the quotes (esc: it
// contains escapes); for numbers and literals, the text. Small on purpose:
// a message's members are copied around by value.
type jsonValue struct {
	start, end int32
	kind       jsonKind
	esc        bool
}

// raw returns v's span of the message b.
func (v jsonValue) raw(b []byte) []byte { return b[v.start:v.end] }

// str returns the value of a string of the message b.
func (v jsonValue) str(b []byte) string {
	if !v.esc {
		return string(v.raw(b))
	}
	return jsonUnescape(v.raw(b))
}

// maxMessage is the largest message the scanner takes: spans are int32.
const maxMessage = 1<<31 - 1

// member is one top-level member of an object.
type member struct {
	key, val jsonValue
}

// maxDepth bounds the nesting of values, as in encoding/json.
const maxDepth = 10000

var errJSONSyntax = errors.New("invalid JSON")

// scanObject validates that b is one JSON object (surrounded by optional
// white space) and appends its members to dst.
func scanObject(b []byte, dst []member) ([]member, error) {
	if len(b) > maxMessage {
		return dst, fmt.Errorf("message of %d bytes exceeds %d", len(b), maxMessage)
	}
	s := scanner{b: b}
	s.ws()
	if s.peek() != '{' {
		if s.i == len(b) {
			return dst, errors.New("empty message")
		}
		return dst, errors.New("message is not a JSON object")
	}
	s.i++
	s.ws()
	if s.peek() == '}' {
		s.i++
	} else {
		for {
			s.ws()
			if s.peek() != '"' {
				return dst, s.syntax("object key")
			}
			key, err := s.value(2)
			if err != nil {
				return dst, err
			}
			s.ws()
			if s.peek() != ':' {
				return dst, s.syntax("':'")
			}
			s.i++
			s.ws()
			val, err := s.value(2)
			if err != nil {
				return dst, err
			}
			dst = append(dst, member{key, val})
			s.ws()
			if c := s.peek(); c == ',' {
				s.i++
				continue
			} else if c == '}' {
				s.i++
				break
			}
			return dst, s.syntax("',' or '}'")
		}
	}
	s.ws()
	if s.i != len(b) {
		return dst, s.syntax("end of message")
	}
	return dst, nil
}

type scanner struct {
	b []byte
	i int
}

func (s *scanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *scanner) ws() {
	if s.i < len(s.b) && s.b[s.i] > ' ' {
		return // the common case: compact JSON (white space is all at or below ' ')
	}
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) syntax(want string) error {
	if s.i >= len(s.b) {
		return fmt.Errorf("%w: unexpected end, want %s", errJSONSyntax, want)
	}
	return fmt.Errorf("%w: unexpected %q at offset %d, want %s", errJSONSyntax, s.b[s.i], s.i, want)
}

// value scans one value; depth is its nesting depth if it is an object or
// an array (the message object has depth 1).
func (s *scanner) value(depth int) (jsonValue, error) {
	start := s.i
	switch c := s.peek(); {
	case c == '"':
		s.i++
		esc := false
		for {
			// the plain bytes up to the next quote, escape or control
			// character, in a tight loop
			b, i := s.b, s.i
			for i < len(b) && b[i] != '"' && b[i] != '\\' && b[i] >= 0x20 {
				i++
			}
			s.i = i
			if s.i >= len(s.b) {
				return jsonValue{}, s.syntax("'\"'")
			}
			c := s.b[s.i]
			switch {
			case c == '"':
				s.i++
				return jsonValue{kind: jsonString, esc: esc, start: int32(start + 1), end: int32(s.i - 1)}, nil
			case c == '\\':
				esc = true
				s.i++
				switch s.peek() {
				case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
					s.i++
				case 'u':
					s.i++
					for range 4 {
						if !isHex(s.peek()) {
							return jsonValue{}, s.syntax("hex digit")
						}
						s.i++
					}
				default:
					return jsonValue{}, s.syntax("escape character")
				}
			case c < 0x20:
				return jsonValue{}, s.syntax("string character")
			default:
				s.i++
			}
		}
	case c == '-' || '0' <= c && c <= '9':
		return s.number()
	case c == 't':
		return s.literal("true", jsonBool)
	case c == 'f':
		return s.literal("false", jsonBool)
	case c == 'n':
		return s.literal("null", jsonNull)
	case c == '{' || c == '[':
		return s.composite(depth)
	}
	return jsonValue{}, s.syntax("value")
}

func (s *scanner) literal(lit string, kind jsonKind) (jsonValue, error) {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return jsonValue{}, s.syntax(lit)
	}
	s.i += len(lit)
	return jsonValue{kind: kind, start: int32(s.i - len(lit)), end: int32(s.i)}, nil
}

// number scans -?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?
func (s *scanner) number() (jsonValue, error) {
	start := s.i
	if s.peek() == '-' {
		s.i++
	}
	if s.peek() == '0' {
		s.i++
	} else if !s.digits() {
		return jsonValue{}, s.syntax("digit")
	}
	if s.peek() == '.' {
		s.i++
		if !s.digits() {
			return jsonValue{}, s.syntax("digit")
		}
	}
	if c := s.peek(); c == 'e' || c == 'E' {
		s.i++
		if c := s.peek(); c == '+' || c == '-' {
			s.i++
		}
		if !s.digits() {
			return jsonValue{}, s.syntax("digit")
		}
	}
	return jsonValue{kind: jsonNumber, start: int32(start), end: int32(s.i)}, nil
}

// digits scans [0-9]* and reports whether it scanned any.
func (s *scanner) digits() bool {
	b, i := s.b, s.i
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	any := i > s.i
	s.i = i
	return any
}

// composite scans and validates an object or array, keeping only its span.
func (s *scanner) composite(depth int) (jsonValue, error) {
	if depth > maxDepth {
		return jsonValue{}, fmt.Errorf("%w: nested deeper than %d", errJSONSyntax, maxDepth)
	}
	start := s.i
	open := s.b[s.i]
	kind, end := jsonObject, byte('}')
	if open == '[' {
		kind, end = jsonArray, ']'
	}
	s.i++
	s.ws()
	if s.peek() == end {
		s.i++
		return jsonValue{kind: kind, start: int32(start), end: int32(s.i)}, nil
	}
	for {
		s.ws()
		if kind == jsonObject {
			if s.peek() != '"' {
				return jsonValue{}, s.syntax("object key")
			}
			if _, err := s.value(depth + 1); err != nil {
				return jsonValue{}, err
			}
			s.ws()
			if s.peek() != ':' {
				return jsonValue{}, s.syntax("':'")
			}
			s.i++
			s.ws()
		}
		if _, err := s.value(depth + 1); err != nil {
			return jsonValue{}, err
		}
		s.ws()
		switch s.peek() {
		case ',':
			s.i++
			continue
		case end:
			s.i++
			return jsonValue{kind: kind, start: int32(start), end: int32(s.i)}, nil
		}
		return jsonValue{}, s.syntax(fmt.Sprintf("',' or '%c'", end))
	}
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// jsonUnescape decodes a validated JSON string body with escapes. Like
// encoding/json, a lone surrogate becomes U+FFFD.
func jsonUnescape(raw []byte) string {
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		i++
		switch raw[i] {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r := hex4(raw[i+1:])
			i += 4
			if utf16.IsSurrogate(r) {
				if i+6 < len(raw) && raw[i+1] == '\\' && raw[i+2] == 'u' {
					if r2 := utf16.DecodeRune(r, hex4(raw[i+3:])); r2 != utf8.RuneError {
						r = r2
						i += 6
					} else {
						r = utf8.RuneError
					}
				} else {
					r = utf8.RuneError
				}
			}
			out = utf8.AppendRune(out, r)
		default: // '"', '\\', '/'
			out = append(out, raw[i])
		}
	}
	return string(out)
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case c <= '9':
			c -= '0'
		case c <= 'F':
			c -= 'A' - 10
		default:
			c -= 'a' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}
