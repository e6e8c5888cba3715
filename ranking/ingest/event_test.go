package ingest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

var testNow = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func testSchemas(t testing.TB) map[string]*Schema {
	t.Helper()
	ss := DefaultSchemas()
	for name, s := range ss {
		s.Now = func() time.Time { return testNow }
		if err := s.Validate(); err != nil {
			t.Fatalf("default schema %s: %v", name, err)
		}
	}
	return ss
}

func TestDecode(t *testing.T) {
	msgTime := testNow.Add(-time.Hour)
	ms := msgTime.Add(-time.Minute).UnixMilli()
	tests := []struct {
		name    string
		topic   string
		value   string
		headers []Header
		wantID  string
		wantT   time.Time
		want    map[string]any // subset of Fields
		reason  string         // expected permanent reason; "" = success
		errPart string
	}{
		{
			name:   "gift full",
			topic:  "gift",
			value:  fmt.Sprintf(`{"id":"g1","ts":%d,"user_id":"u1","anchor_id":"a1","room_id":"r1","zone":"3","gift_id":"ice_castle","count":2,"coins":9007199254740993,"extra":[1,2]}`, ms),
			wantID: "g1",
			wantT:  time.UnixMilli(ms),
			want: map[string]any{"id": "g1", "ts": ms, "user_id": "u1", "anchor_id": "a1", "zone": "3",
				"gift_id": "ice_castle", "count": int64(2), "coins": int64(9007199254740993)},
		},
		{
			name:   "missing fields take defaults, ts from message, id from offset",
			topic:  "like",
			value:  `{"anchor_id":"a1"}`,
			wantID: "like/3/42",
			wantT:  msgTime,
			want:   map[string]any{"count": int64(1), "user_id": "", "id": "like/3/42", "ts": msgTime.UnixMilli()},
		},
		{
			name:    "id from header",
			topic:   "like",
			value:   `{"anchor_id":"a1","id":""}`,
			headers: []Header{{Key: "x", Value: []byte("no")}, {Key: "id", Value: []byte("h-7")}},
			wantID:  "h-7",
			wantT:   msgTime,
		},
		{
			name:   "null is absent, integers for strings, integral numbers for ints",
			topic:  "gift",
			value:  `{"id":12345,"anchor_id":-7,"count":1.5e1,"coins":1E3,"zone":null}`,
			wantID: "12345",
			wantT:  msgTime,
			want:   map[string]any{"anchor_id": "-7", "count": int64(15), "coins": int64(1000), "zone": ""},
		},
		{
			name: "zero with huge exponent", topic: "gift",
			value: `{"coins":0e999999999999}`, wantID: "gift/3/42", wantT: msgTime,
			want: map[string]any{"coins": int64(0)},
		},
		{name: "not json", topic: "gift", value: `gift!`, reason: ReasonDecode},
		{name: "array", topic: "gift", value: `[1,2]`, reason: ReasonDecode},
		{name: "null message", topic: "gift", value: `null`, reason: ReasonDecode},
		{name: "trailing data", topic: "gift", value: `{"a":1} {"b":2}`, reason: ReasonDecode},
		{name: "truncated", topic: "gift", value: `{"a":`, reason: ReasonDecode},
		{name: "invalid utf-8", topic: "gift", value: "{\"anchor_id\":\"a\xff\"}", reason: ReasonDecode},
		{name: "string for int", topic: "gift", value: `{"coins":"5"}`, reason: ReasonValidation, errPart: `field "coins": want int, got string`},
		{name: "fraction for int", topic: "gift", value: `{"coins":1.5}`, reason: ReasonValidation, errPart: "not an integer"},
		{name: "tiny exponent for int", topic: "gift", value: `{"coins":1e-999999999999}`, reason: ReasonValidation, errPart: "not an integer"},
		{name: "int64 overflow", topic: "gift", value: `{"coins":9223372036854775808}`, reason: ReasonOutOfRange},
		{name: "int64 overflow by exponent", topic: "gift", value: `{"coins":1e19}`, reason: ReasonOutOfRange},
		{name: "huge exponent", topic: "gift", value: `{"coins":1e999999999999}`, reason: ReasonOutOfRange},
		{name: "int64 min by exponent", topic: "comment", value: `{"news_ts":-9.223372036854775808e18}`, wantID: "comment/3/42", wantT: msgTime,
			want: map[string]any{"news_ts": int64(-9223372036854775808)}},
		{name: "object for string", topic: "gift", value: `{"anchor_id":{"x":1}}`, reason: ReasonValidation, errPart: "got object"},
		{name: "bool for string", topic: "gift", value: `{"anchor_id":true}`, reason: ReasonValidation},
		{name: "fraction for string", topic: "gift", value: `{"anchor_id":1.5}`, reason: ReasonValidation},
		{name: "bad ts", topic: "gift", value: `{"ts":"yesterday"}`, reason: ReasonValidation, errPart: `field "ts"`},
		{name: "bad id", topic: "gift", value: `{"id":[1]}`, reason: ReasonValidation, errPart: `field "id"`},
		{name: "negative ts", topic: "gift", value: `{"ts":-1}`, reason: ReasonOutOfRange, errPart: "outside years"},
		{name: "ts beyond year 9999", topic: "gift", value: `{"ts":253402300800000}`, reason: ReasonOutOfRange},
		// future is judged against the message timestamp (part of the log),
		// not the clock, so that a replay decides the same way
		{name: "future", topic: "gift", value: fmt.Sprintf(`{"ts":%d}`, msgTime.Add(2*time.Minute).UnixMilli()), reason: ReasonFuture},
		{name: "within skew", topic: "gift", value: fmt.Sprintf(`{"ts":%d}`, msgTime.Add(time.Minute).UnixMilli()),
			wantID: "gift/3/42", wantT: time.UnixMilli(msgTime.Add(time.Minute).UnixMilli())},
		{name: "too large", topic: "comment", value: `{"text":"` + strings.Repeat("x", DefaultMaxMessageBytes) + `"}`, reason: ReasonTooLarge},
		{name: "invalid utf-8 id header", topic: "gift", value: `{}`, headers: []Header{{Key: "id", Value: []byte{0xff}}}, reason: ReasonValidation},
	}
	ss := testSchemas(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := ss[tt.topic].Decode(tt.topic, 3, 42, []byte(tt.value), tt.headers, msgTime)
			if tt.reason != "" {
				var pe *PermanentError
				if !errors.As(err, &pe) || pe.Reason != tt.reason || !IsPermanent(err) {
					t.Fatalf("err = %v, want permanent %q", err, tt.reason)
				}
				if !strings.Contains(err.Error(), tt.errPart) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.errPart)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ev.ID != tt.wantID || !ev.Time.Equal(tt.wantT) || ev.Topic != tt.topic || ev.Partition != 3 || ev.Offset != 42 {
				t.Fatalf("event = %+v, want id %q time %v", ev, tt.wantID, tt.wantT)
			}
			for k, v := range tt.want {
				if got, ok := ev.Fields()[k]; !ok || got != v {
					t.Errorf("Fields[%q] = %#v, want %#v", k, got, v)
				}
			}
			if got := len(ev.Fields()); got != len(ss[tt.topic].Fields)+2 {
				t.Errorf("%d fields, want %d", got, len(ss[tt.topic].Fields)+2)
			}
		})
	}
}

func TestDecodeRequiredAndCustomNames(t *testing.T) {
	s := &Schema{IDField: "msg_id", TSField: "at", Fields: []Field{
		{Name: "player", Type: TypeString, Required: true},
		{Name: "ratio", Type: TypeFloat},
		{Name: "vip", Type: TypeBool},
	}}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	ev, err := s.Decode("t", 0, 1, []byte(`{"msg_id":"m","at":1000,"player":"p","ratio":2,"vip":true,"id":"ignored"}`), nil, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if ev.ID != "m" || ev.Time.UnixMilli() != 1000 || ev.Fields()["ratio"] != 2.0 || ev.Fields()["vip"] != true || ev.Fields()["at"] != int64(1000) {
		t.Fatalf("event = %+v", ev)
	}
	if _, err := s.Decode("t", 0, 1, []byte(`{"at":1}`), nil, time.Time{}); Reason(err) != ReasonValidation || !strings.Contains(err.Error(), `"player"`) {
		t.Fatalf("missing required: err = %v", err)
	}
	if _, err := s.Decode("t", 0, 1, []byte(`{"player":"p"}`), nil, time.Time{}); Reason(err) != ReasonValidation {
		t.Fatalf("no time at all: err = %v", err)
	}
	if _, err := s.Decode("t", 0, 1, []byte(`{"player":"p","ratio":1e400}`), nil, time.Unix(1, 0)); Reason(err) != ReasonOutOfRange {
		t.Fatalf("float overflow: err = %v", err)
	}
	if _, err := s.Decode("t", 0, 1, []byte(`{"player":"p","vip":1}`), nil, time.Unix(1, 0)); Reason(err) != ReasonValidation {
		t.Fatalf("number for bool: err = %v", err)
	}
}

func TestSchemaValidate(t *testing.T) {
	tests := []struct {
		name    string
		s       Schema
		errPart string
	}{
		{"bad id field", Schema{IDField: "msg-id", TSField: "ts"}, `id field "msg-id"`},
		{"same id and ts", Schema{IDField: "x", TSField: "x"}, "both"},
		{"duplicate field", Schema{IDField: "id", TSField: "ts", Fields: []Field{{Name: "a", Type: TypeInt}, {Name: "a", Type: TypeInt}}}, `"a" declared twice`},
		{"field named like id", Schema{IDField: "id", TSField: "ts", Fields: []Field{{Name: "ts", Type: TypeInt}}}, `"ts" declared twice`},
		{"bad type", Schema{IDField: "id", TSField: "ts", Fields: []Field{{Name: "a"}}}, "unknown type"},
		{"bad default", Schema{IDField: "id", TSField: "ts", Fields: []Field{{Name: "a", Type: TypeInt, Default: 1}}}, "not a Go int64"},
		{"digit first", Schema{IDField: "id", TSField: "ts", Fields: []Field{{Name: "1a", Type: TypeInt}}}, `"1a" is not an identifier`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.s.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.errPart) {
				t.Fatalf("err = %v, want %q", err, tt.errPart)
			}
		})
	}
}

func TestParseFieldType(t *testing.T) {
	for _, s := range []string{"string", "int", "float", "bool"} {
		ft, err := ParseFieldType(s)
		if err != nil || ft.String() != s {
			t.Errorf("ParseFieldType(%q) = %v, %v", s, ft, err)
		}
	}
	if _, err := ParseFieldType("int64"); err == nil {
		t.Error("ParseFieldType(int64) succeeded")
	}
}

func TestPermanentError(t *testing.T) {
	base := errors.New("boom")
	err := fmt.Errorf("routing: %w", &PermanentError{Reason: ReasonNoMember, Err: base})
	if !IsPermanent(err) || Reason(err) != ReasonNoMember || !errors.Is(err, base) {
		t.Fatalf("classification of %v failed", err)
	}
	if IsPermanent(base) || Reason(base) != "" || IsPermanent(nil) {
		t.Fatal("plain error classified permanent")
	}
	if got := err.Error(); got != "routing: no_member: boom" {
		t.Fatalf("Error() = %q", got)
	}
}
