package config

import (
	"strings"
	"testing"
	"time"

	"github.com/rankd/rankd/ranking/ingest"
)

// TestTopicLimitDefaults checks the input limits a file gets without
// saying anything: those of ingest.DefaultSchemas for gift, like and
// comment, the schema-wide ones for a topic the file declares.
func TestTopicLimitDefaults(t *testing.T) {
	c, err := LoadBytes("t.yaml", []byte(base+"topics:\n  clicks:\n    fields:\n      page: string\n"))
	if err != nil {
		t.Fatal(err)
	}
	y2k := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, name := range []string{"gift", "like", "comment", "clicks"} {
		s := c.Schemas()[name]
		if s.MaxIDLen != 256 || s.MaxKeyLen != 256 || !s.MinTime.Equal(y2k) {
			t.Errorf("%s: max_id_len %d, max_key_len %d, min_time %v; want 256, 256, %v", name, s.MaxIDLen, s.MaxKeyLen, s.MinTime, y2k)
		}
	}
	field := func(topic, name string) ingest.Field {
		for _, f := range c.Schemas()[topic].Fields {
			if f.Name == name {
				return f
			}
		}
		t.Fatalf("%s has no field %s", topic, name)
		return ingest.Field{}
	}
	for _, tt := range []struct {
		topic, field string
		min, max     any
		maxLen       int
	}{
		{"like", "count", int64(1), nil, 0},
		{"gift", "count", int64(1), nil, 0},
		{"gift", "coins", int64(0), nil, 0},
		{"gift", "anchor_id", nil, nil, 256},
		{"gift", "user_id", nil, nil, 256},
		{"gift", "room_id", nil, nil, 256},
		{"gift", "zone", nil, nil, 256},
		{"gift", "gift_id", nil, nil, 256},
		{"comment", "news_id", nil, nil, 256},
		{"comment", "news_ts", nil, nil, 0},
		{"comment", "text", nil, nil, 0},
		{"clicks", "page", nil, nil, 0},
	} {
		if f := field(tt.topic, tt.field); f.Min != tt.min || f.Max != tt.max || f.MaxLen != tt.maxLen {
			t.Errorf("%s.%s: min %v, max %v, max_len %d; want %v, %v, %d", tt.topic, tt.field, f.Min, f.Max, f.MaxLen, tt.min, tt.max, tt.maxLen)
		}
	}
	if f := field("like", "count"); f.Default != int64(1) {
		t.Errorf("like.count default %v", f.Default)
	}

	// The example's like with count -1000000 and its gift with ts 0 are
	// dead-lettered as validation.
	ex, err := LoadBytes("example.yaml", Example())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct{ topic, value, err string }{
		{"like", `{"id":"l","ts":1763700000000,"anchor_id":"a","count":-1000000}`, `validation: field "count": -1000000 is below min 1`},
		{"gift", `{"id":"g","ts":0,"anchor_id":"a","count":1,"coins":5}`, `validation: field "ts": event time 1970-01-01T00:00:00Z is before min_time 2000-01-01T00:00:00Z`},
		{"comment", `{"id":"` + strings.Repeat("m", 900000) + `","ts":1763700000000,"news_id":"n"}`, `validation: field "id": message ID of 900000 bytes exceeds max_id_len 256`},
	} {
		_, err := ex.Schemas()[tt.topic].Decode(tt.topic, 0, 1, []byte(tt.value), nil, now)
		if ingest.Reason(err) != ingest.ReasonValidation || err.Error() != tt.err {
			t.Errorf("%s: err\n got %v\nwant %s", tt.topic, err, tt.err)
		}
	}
}

// TestTopicLimits sets every limit key and checks the schemas, decoding
// and routing.
func TestTopicLimits(t *testing.T) {
	src := base + `topics:
  gift:
    max_id_len: 8
    max_key_len: 6
    min_time: 2020-01-01
    fields:
      coins: {type: int, min: -10, max: 1000000}
      zone: {type: string, max_len: 3, default: "z"}
      ratio: {type: float, min: -1.5, max: 2.5, default: 0.5}
  clicks:
    min_time: 2024-06-01T00:00:00+08:00
    fields:
      page: {type: string, max_len: 100, required: true}
`
	c, err := LoadBytes("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	gift := c.Schemas()["gift"]
	if gift.MaxIDLen != 8 || gift.MaxKeyLen != 6 || !gift.MinTime.Equal(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("gift limits %d, %d, %v", gift.MaxIDLen, gift.MaxKeyLen, gift.MinTime)
	}
	clicks := c.Schemas()["clicks"]
	if clicks.MaxIDLen != 256 || clicks.MaxKeyLen != 256 || !clicks.MinTime.Equal(time.Date(2024, 5, 31, 16, 0, 0, 0, time.UTC)) {
		t.Errorf("clicks limits %d, %d, %v", clicks.MaxIDLen, clicks.MaxKeyLen, clicks.MinTime)
	}
	want := map[string]ingest.Field{
		"coins":     {Name: "coins", Type: ingest.TypeInt, Min: int64(-10), Max: int64(1000000)},
		"zone":      {Name: "zone", Type: ingest.TypeString, MaxLen: 3, Default: "z"},
		"ratio":     {Name: "ratio", Type: ingest.TypeFloat, Min: -1.5, Max: 2.5, Default: 0.5},
		"count":     {Name: "count", Type: ingest.TypeInt, Min: int64(1)},                          // untouched default
		"anchor_id": {Name: "anchor_id", Type: ingest.TypeString, MaxLen: ingest.DefaultMaxKeyLen}, // untouched default
	}
	for _, f := range gift.Fields {
		if w, ok := want[f.Name]; ok {
			if f != w {
				t.Errorf("gift field %s = %+v, want %+v", f.Name, f, w)
			}
			delete(want, f.Name)
		}
	}
	if len(want) > 0 {
		t.Errorf("gift lacks fields %v", want)
	}

	r, err := c.Router()
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct{ value, err string }{
		{`{"id":"g1","anchor_id":"abcdef","coins":-10,"zone":"abc","ratio":2.5}`, ""},
		{`{"id":"g1","anchor_id":"a","coins":-11}`, `validation: field "coins": -11 is below min -10`},
		{`{"id":"g1","anchor_id":"a","coins":1000001}`, `validation: field "coins": 1000001 is above max 1000000`},
		{`{"id":"g1","anchor_id":"a","zone":"abcd"}`, `validation: field "zone": 4 bytes exceed max_len 3`},
		{`{"id":"g1","anchor_id":"a","ratio":-1.6}`, `validation: field "ratio": -1.6 is below min -1.5`},
		{`{"id":"123456789","anchor_id":"a"}`, `validation: field "id": message ID of 9 bytes exceeds max_id_len 8`},
		{`{"id":"g1","ts":1577836799999,"anchor_id":"a"}`, `validation: field "ts": event time 2019-12-31T23:59:59.999Z is before min_time 2020-01-01T00:00:00Z`},
		{`{"id":"g1","anchor_id":"abcdefg"}`, `validation: member from "anchor_id": 7 bytes exceed max_key_len 6`},
	} {
		ev, err := gift.Decode("gift", 0, 1, []byte(tt.value), nil, at)
		if err == nil {
			_, err = r.Route(ev)
		}
		if tt.err == "" && err != nil || tt.err != "" && (ingest.Reason(err) != ingest.ReasonValidation || err.Error() != tt.err) {
			t.Errorf("%s: err\n got %v\nwant %s", tt.value, err, tt.err)
		}
	}
	if _, err := clicks.Decode("clicks", 0, 1, []byte(`{"page":"p","ts":1717171200000}`), nil, at); err != nil {
		t.Errorf("clicks at the floor: %v", err)
	}
	if _, err := clicks.Decode("clicks", 0, 1, []byte(`{"page":"p","ts":1717171199999}`), nil, at); err == nil ||
		err.Error() != `validation: field "ts": event time 2024-05-31T15:59:59.999Z is before min_time 2024-05-31T16:00:00Z` {
		t.Errorf("clicks before the floor: err = %v", err)
	}
}

// TestBrokenLimits checks that bad limit values are reported at their
// file:line:column with the field path.
func TestBrokenLimits(t *testing.T) {
	tests := []struct {
		name string
		add  string // appended to base (line 10 on)
		want string // expected prefix of the first error
	}{
		{"min not an int", "topics:\n  gift:\n    fields:\n      count: {type: int, min: lots}\n",
			`t.yaml:13:31: topics.gift.fields.count.min: "lots" is not a valid int`},
		{"fractional int min", "topics:\n  gift:\n    fields:\n      count: {type: int, min: 1.5}\n",
			`t.yaml:13:31: topics.gift.fields.count.min: "1.5" is not a valid int`},
		{"NaN max", "topics:\n  gift:\n    fields:\n      ratio: {type: float, max: NaN}\n",
			`t.yaml:13:33: topics.gift.fields.ratio.max: "NaN" is not a valid float`},
		{"min on a string", "topics:\n  gift:\n    fields:\n      zone: {type: string, min: 1}\n",
			`t.yaml:13:33: topics.gift.fields.zone.min: min is only for int and float fields, not string`},
		{"max on a bool", "topics:\n  gift:\n    fields:\n      vip: {type: bool, max: 1}\n",
			`t.yaml:13:30: topics.gift.fields.vip.max: max is only for int and float fields, not bool`},
		{"max_len on an int", "topics:\n  gift:\n    fields:\n      coins: {type: int, max_len: 5}\n",
			`t.yaml:13:35: topics.gift.fields.coins.max_len: max_len is only for string fields, not int`},
		{"max_len 0", "topics:\n  gift:\n    fields:\n      zone: {type: string, max_len: 0}\n",
			`t.yaml:13:37: topics.gift.fields.zone.max_len: must be at least 1, got 0`},
		{"max_len not an integer", "topics:\n  gift:\n    fields:\n      zone: {type: string, max_len: long}\n",
			`t.yaml:13:37: topics.gift.fields.zone.max_len: want an integer, got "long"`},
		{"min above max", "topics:\n  gift:\n    fields:\n      count: {type: int, min: 5, max: 4}\n",
			`t.yaml:13:39: topics.gift.fields.count.max: max 4 is below min 5`},
		{"default below min", "topics:\n  gift:\n    fields:\n      count: {type: int, min: 1, default: 0}\n",
			`t.yaml:13:43: topics.gift.fields.count.default: default 0: 0 is below min 1`},
		{"default too long", "topics:\n  gift:\n    fields:\n      zone: {type: string, max_len: 2, default: abc}\n",
			`t.yaml:13:49: topics.gift.fields.zone.default: default abc: 3 bytes exceed max_len 2`},
		{"unknown field key", "topics:\n  gift:\n    fields:\n      count: {type: int, minimum: 1}\n",
			`t.yaml:13:26: topics.gift.fields.count.minimum: unknown key "minimum" (want default, max, max_len, min, required, type)`},
		{"max_id_len 0", "topics:\n  gift:\n    max_id_len: 0\n",
			`t.yaml:12:17: topics.gift.max_id_len: must be at least 1, got 0`},
		{"max_id_len not an integer", "topics:\n  gift:\n    max_id_len: many\n",
			`t.yaml:12:17: topics.gift.max_id_len: want an integer, got "many"`},
		{"negative max_key_len", "topics:\n  gift:\n    max_key_len: -5\n",
			`t.yaml:12:18: topics.gift.max_key_len: must be at least 1, got -5`},
		{"bad min_time", "topics:\n  gift:\n    min_time: yesterday\n",
			`t.yaml:12:15: topics.gift.min_time: invalid time "yesterday" (want RFC 3339, e.g. 2025-01-01T00:00:00+08:00, or a UTC date 2025-01-01)`},
		{"unknown topic key", "topics:\n  gift:\n    max_len: 5\n",
			`t.yaml:12:5: topics.gift.max_len: unknown key "max_len" (want fields, id, max_id_len, max_key_len, min_time, ts)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := base + tt.add
			_, err := LoadBytes("t.yaml", []byte(src))
			if err == nil {
				t.Fatalf("config accepted:\n%s", src)
			}
			first, _, _ := strings.Cut(err.Error(), "\n")
			if !strings.HasPrefix(first, tt.want) {
				t.Fatalf("first error\n got %s\nwant %s...\nall errors:\n%v\nconfig:\n%s", first, tt.want, err, src)
			}
			if n := strings.Count(err.Error(), "\n") + 1; n != 1 {
				t.Errorf("%d errors, want 1:\n%v", n, err)
			}
		})
	}
}
