package ingest

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// FieldType is the type of a declared event field.
type FieldType int

// Field types. In Event.Fields and in expressions they are the Go types
// string, int64, float64 and bool.
const (
	// TypeString accepts JSON strings, and JSON integers as their decimal
	// text (so numeric IDs work).
	TypeString FieldType = iota + 1
	// TypeInt accepts JSON numbers with an integral value within int64
	// (1, -2, 1.0, 1e3).
	TypeInt
	// TypeFloat accepts finite JSON numbers.
	TypeFloat
	// TypeBool accepts JSON true and false.
	TypeBool
)

// ParseFieldType parses "string", "int", "float" or "bool".
func ParseFieldType(s string) (FieldType, error) {
	for t := TypeString; t <= TypeBool; t++ {
		if s == t.String() {
			return t, nil
		}
	}
	return 0, fmt.Errorf("unknown field type %q (want string, int, float or bool)", s)
}

// String returns the type's name as ParseFieldType accepts it.
func (t FieldType) String() string {
	switch t {
	case TypeString:
		return "string"
	case TypeInt:
		return "int"
	case TypeFloat:
		return "float"
	case TypeBool:
		return "bool"
	}
	return fmt.Sprintf("type(%d)", int(t))
}

// Field is one declared event field.
type Field struct {
	Name     string
	Type     FieldType
	Required bool // a message without it is invalid
	// Default is the value of a missing field (nil: the zero value). Its Go
	// type must be that of Type: string, int64, float64 or bool.
	Default any
	// Min and Max bound the value a message gives to an int or float field
	// (nil: no bound); their Go type is that of Type (int64 or float64). A
	// value outside them is rejected with ReasonValidation. They bound what
	// messages give, not the value of a missing field: an explicit Default
	// must lie within them, the zero value of a field without one is not
	// checked (make the field Required to insist on a value).
	Min, Max any
	// MaxLen bounds the length in bytes (UTF-8) of the value a message gives
	// to a string field; 0: no bound (beyond the message size). A longer
	// value is rejected with ReasonValidation.
	MaxLen int
}

// validate appends the problems of the field's type, default and bounds
// to errs.
func (f Field) validate(errs []error) []error {
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("field %q: "+format, append([]any{f.Name}, args...)...))
	}
	if f.Type < TypeString || f.Type > TypeBool {
		fail("unknown type %d", int(f.Type))
		return errs
	}
	if f.Default != nil && !f.Type.holds(f.Default) {
		fail("default %v (%T) is not a Go %s", f.Default, f.Default, f.Type.goType())
		return errs
	}
	numeric := f.Type == TypeInt || f.Type == TypeFloat
	for _, b := range []struct {
		name string
		v    any
	}{{"min", f.Min}, {"max", f.Max}} {
		switch {
		case b.v == nil:
		case !numeric:
			fail("%s is only for int and float fields, not %s", b.name, f.Type)
		case !f.Type.holds(b.v):
			fail("%s %v (%T) is not a Go %s", b.name, b.v, b.v, f.Type.goType())
		case f.Type == TypeFloat && !finite(b.v.(float64)):
			fail("%s %v is not finite", b.name, b.v)
		}
	}
	switch {
	case f.MaxLen < 0:
		fail("negative max_len %d", f.MaxLen)
	case f.MaxLen > 0 && f.Type != TypeString:
		fail("max_len is only for string fields, not %s", f.Type)
	}
	if len(errs) > 0 {
		return errs
	}
	if f.Min != nil && f.Max != nil && f.Type.less(f.Max, f.Min) {
		fail("min %v is above max %v", f.Min, f.Max)
		return errs
	}
	if f.Default != nil {
		if err := f.Check(f.Default); err != nil {
			fail("default %v: %v", f.Default, err)
		}
	}
	return errs
}

// Check reports a value of the field's Go type outside its bounds (Min,
// Max, MaxLen); the error does not name the field.
func (f Field) Check(v any) error {
	switch x := v.(type) {
	case string:
		if f.MaxLen > 0 && len(x) > f.MaxLen {
			return fmt.Errorf("%d bytes exceed max_len %d", len(x), f.MaxLen)
		}
	case int64, float64:
		if f.Min != nil && f.Type.less(v, f.Min) {
			return fmt.Errorf("%v is below min %v", v, f.Min)
		}
		if f.Max != nil && f.Type.less(f.Max, v) {
			return fmt.Errorf("%v is above max %v", v, f.Max)
		}
	}
	return nil
}

// less compares two values of an int or float type.
func (t FieldType) less(a, b any) bool {
	if t == TypeInt {
		return a.(int64) < b.(int64)
	}
	return a.(float64) < b.(float64)
}

func (f Field) defaultValue() any {
	if f.Default != nil {
		return f.Default
	}
	return f.Type.zero()
}

func (t FieldType) zero() any {
	switch t {
	case TypeString:
		return ""
	case TypeInt:
		return int64(0)
	case TypeFloat:
		return float64(0)
	}
	return false
}

func (t FieldType) goType() string {
	return fmt.Sprintf("%T", t.zero())
}

// holds reports whether v has the Go type of t.
func (t FieldType) holds(v any) bool {
	switch v.(type) {
	case string:
		return t == TypeString
	case int64:
		return t == TypeInt
	case float64:
		return t == TypeFloat
	case bool:
		return t == TypeBool
	}
	return false
}

// fieldValue is a field's value without boxing: a string field's value in
// s; an int's int64, a float's float64 bits or a bool (1: true) in n.
type fieldValue struct {
	s string
	n uint64
}

// valueOf returns the fieldValue of x, a value of t's Go type.
func (t FieldType) valueOf(x any) fieldValue {
	switch v := x.(type) {
	case string:
		return fieldValue{s: v}
	case int64:
		return fieldValue{n: uint64(v)}
	case float64:
		return fieldValue{n: math.Float64bits(v)}
	case bool:
		if v {
			return fieldValue{n: 1}
		}
	}
	return fieldValue{}
}

// box returns v as the Go type of t (string, int64, float64, bool).
func (t FieldType) box(v fieldValue) any {
	switch t {
	case TypeString:
		return v.s
	case TypeInt:
		return int64(v.n)
	case TypeFloat:
		return math.Float64frombits(v.n)
	}
	return v.n != 0
}

// check is Check of a value of the field's type, without boxing it unless
// it is out of bounds.
func (f *Field) check(v fieldValue) error {
	switch f.Type {
	case TypeString:
		if f.MaxLen <= 0 || len(v.s) <= f.MaxLen {
			return nil
		}
	case TypeInt:
		x := int64(v.n)
		if (f.Min == nil || x >= f.Min.(int64)) && (f.Max == nil || x <= f.Max.(int64)) {
			return nil
		}
	case TypeFloat:
		x := math.Float64frombits(v.n)
		if (f.Min == nil || !(x < f.Min.(float64))) && (f.Max == nil || !(f.Max.(float64) < x)) {
			return nil
		}
	default:
		return nil
	}
	return f.Check(f.Type.box(v))
}

// parse converts a scanned JSON value (not null) of the message b to t.
// msg is the message as a string when the strings of its values may share
// it ("": they are copied).
func (t FieldType) parse(v jsonValue, b []byte, msg string) (fieldValue, error) {
	switch {
	case t == TypeString && v.kind == jsonString:
		if msg != "" && !v.esc {
			return fieldValue{s: msg[v.start:v.end]}, nil
		}
		return fieldValue{s: v.str(b)}, nil
	case t == TypeString && v.kind == jsonNumber:
		i, err := parseIntBytes(v.raw(b))
		if err != nil {
			return fieldValue{}, err
		}
		return fieldValue{s: strconv.FormatInt(i, 10)}, nil
	case t == TypeInt && v.kind == jsonNumber:
		i, err := parseIntBytes(v.raw(b))
		return fieldValue{n: uint64(i)}, err
	case t == TypeFloat && v.kind == jsonNumber:
		f, err := strconv.ParseFloat(string(v.raw(b)), 64)
		if err != nil || !finite(f) {
			return fieldValue{}, permanent(ReasonOutOfRange, "%s does not fit a float64", v.raw(b))
		}
		return fieldValue{n: math.Float64bits(f)}, nil
	case t == TypeBool && v.kind == jsonBool:
		if b[v.start] == 't' {
			return fieldValue{n: 1}, nil
		}
		return fieldValue{}, nil
	}
	return fieldValue{}, fmt.Errorf("want %s, got %s", t, v.kind)
}

// parseIntBytes is parseInt of a scanned JSON number, without copying the
// common ones: an optional minus and at most 18 digits.
func parseIntBytes(b []byte) (int64, error) {
	digits := b
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 18 {
		return parseInt(string(b))
	}
	var n int64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return parseInt(string(b))
		}
		n = n*10 + int64(c-'0')
	}
	if len(digits) < len(b) {
		n = -n
	}
	return n, nil
}

// parseInt parses a JSON number whose value is an integer within int64,
// exactly: 12, -3, 1.0, 1.5e1 and 1e3 are integers, 1.5 is not. It never
// materializes huge exponents.
func parseInt(n string) (int64, error) {
	s := n
	i, err := strconv.ParseInt(s, 10, 64)
	if err == nil {
		return i, nil
	}
	if errors.Is(err, strconv.ErrRange) {
		return 0, permanent(ReasonOutOfRange, "%s does not fit an int64", s)
	}
	// Split into sign, digits and a decimal exponent: value = digits * 10^exp.
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	mant, expPart, hasExp := strings.Cut(strings.ToLower(s), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	exp := -len(frac)
	if hasExp {
		e, err := strconv.Atoi(expPart)
		switch {
		case err != nil && digits == "":
			exp = 0
		case err != nil && strings.HasPrefix(expPart, "-"):
			return 0, fmt.Errorf("%s is not an integer", n)
		case err != nil:
			return 0, permanent(ReasonOutOfRange, "%s does not fit an int64", n)
		default:
			exp += e
		}
	}
	for len(digits) > 0 && digits[len(digits)-1] == '0' {
		digits = digits[:len(digits)-1]
		exp++
	}
	if digits == "" {
		return 0, nil
	}
	if exp < 0 {
		return 0, fmt.Errorf("%s is not an integer", n)
	}
	if len(digits)+exp > 19 {
		return 0, permanent(ReasonOutOfRange, "%s does not fit an int64", n)
	}
	if neg {
		digits = "-" + digits
	}
	i, err = strconv.ParseInt(digits+strings.Repeat("0", exp), 10, 64)
	if err != nil {
		return 0, permanent(ReasonOutOfRange, "%s does not fit an int64", n)
	}
	return i, nil
}
