package ingest

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// TestDecodeLimits checks the bounds of the default schemas: count and
// coins minimums, the length of identifier fields, of the message ID, and
// the event-time floor. Every violation is a validation error naming the
// field and the limit.
func TestDecodeLimits(t *testing.T) {
	msgTime := testNow.Add(-time.Hour)
	ms := msgTime.Add(-time.Minute).UnixMilli()
	x := func(n int) string { return strings.Repeat("x", n) }
	tests := []struct {
		name    string
		topic   string
		value   string
		headers []Header
		msgTime time.Time      // zero: msgTime
		want    map[string]any // subset of Fields; nil when err is set
		err     string         // the whole error; "" = success
	}{
		// numbers
		{name: "like count -1000000", topic: "like", value: `{"anchor_id":"a","count":-1000000}`,
			err: `validation: field "count": -1000000 is below min 1`},
		{name: "like count 0", topic: "like", value: `{"anchor_id":"a","count":0}`,
			err: `validation: field "count": 0 is below min 1`},
		{name: "like count 1", topic: "like", value: `{"anchor_id":"a","count":1}`, want: map[string]any{"count": int64(1)}},
		{name: "like count missing takes its default", topic: "like", value: `{"anchor_id":"a"}`, want: map[string]any{"count": int64(1)}},
		{name: "like count null takes its default", topic: "like", value: `{"anchor_id":"a","count":null}`, want: map[string]any{"count": int64(1)}},
		{name: "gift count 0", topic: "gift", value: `{"anchor_id":"a","count":0,"coins":5}`,
			err: `validation: field "count": 0 is below min 1`},
		{name: "gift count -0 by exponent", topic: "gift", value: `{"anchor_id":"a","count":-0e5}`,
			err: `validation: field "count": 0 is below min 1`},
		{name: "gift coins -1", topic: "gift", value: `{"anchor_id":"a","count":1,"coins":-1}`,
			err: `validation: field "coins": -1 is below min 0`},
		{name: "gift coins 0", topic: "gift", value: `{"anchor_id":"a","count":1,"coins":0}`,
			want: map[string]any{"count": int64(1), "coins": int64(0)}},
		{name: "gift int64 max coins", topic: "gift", value: `{"count":9223372036854775807,"coins":9223372036854775807}`,
			want: map[string]any{"count": int64(9223372036854775807), "coins": int64(9223372036854775807)}},
		{name: "comment news_ts unbounded", topic: "comment", value: `{"news_ts":-5}`, want: map[string]any{"news_ts": int64(-5)}},

		// strings, in bytes of UTF-8 after unescaping
		{name: "1,000,000-char member id", topic: "like", value: `{"anchor_id":"` + x(1000000) + `"}`,
			err: `validation: field "anchor_id": 1000000 bytes exceed max_len 256`},
		{name: "500 KB room id", topic: "gift", value: `{"anchor_id":"a","room_id":"` + x(500<<10) + `"}`,
			err: `validation: field "room_id": 512000 bytes exceed max_len 256`},
		{name: "anchor_id of 256 bytes", topic: "gift", value: `{"anchor_id":"` + x(256) + `"}`, want: map[string]any{"anchor_id": x(256)}},
		{name: "anchor_id of 257 bytes", topic: "gift", value: `{"anchor_id":"` + x(257) + `"}`,
			err: `validation: field "anchor_id": 257 bytes exceed max_len 256`},
		{name: "user_id of 85 CJK characters (255 bytes)", topic: "gift", value: `{"user_id":"` + strings.Repeat("界", 85) + `"}`,
			want: map[string]any{"user_id": strings.Repeat("界", 85)}},
		{name: "user_id of 86 CJK characters (258 bytes)", topic: "gift", value: `{"user_id":"` + strings.Repeat("界", 86) + `"}`,
			err: `validation: field "user_id": 258 bytes exceed max_len 256`},
		{name: "escapes counted once unescaped: 256 bytes", topic: "like", value: `{"zone":"` + strings.Repeat(`\u0041`, 256) + `"}`,
			want: map[string]any{"zone": strings.Repeat("A", 256)}},
		{name: "escapes counted once unescaped: 258 bytes", topic: "like", value: `{"zone":"` + strings.Repeat(`\u00e9`, 129) + `"}`,
			err: `validation: field "zone": 258 bytes exceed max_len 256`},
		{name: "gift_id of 300 bytes", topic: "gift", value: `{"gift_id":"` + x(300) + `"}`,
			err: `validation: field "gift_id": 300 bytes exceed max_len 256`},
		{name: "news_id of 300 bytes", topic: "comment", value: `{"news_id":"` + x(300) + `"}`,
			err: `validation: field "news_id": 300 bytes exceed max_len 256`},
		{name: "comment text is bounded by the message size only", topic: "comment", value: `{"text":"` + x(100000) + `"}`,
			want: map[string]any{"text": x(100000)}},

		// message IDs
		{name: "900 KB message id", topic: "like", value: `{"id":"` + x(900000) + `"}`,
			err: `validation: field "id": message ID of 900000 bytes exceeds max_id_len 256`},
		{name: "id of 256 bytes", topic: "like", value: `{"id":"` + x(256) + `"}`, want: map[string]any{"id": x(256)}},
		{name: "id of 257 bytes", topic: "like", value: `{"id":"` + x(257) + `"}`,
			err: `validation: field "id": message ID of 257 bytes exceeds max_id_len 256`},
		{name: "header id of 257 bytes", topic: "like", value: `{}`, headers: []Header{{Key: "id", Value: []byte(x(257))}},
			err: `validation: header "id": message ID of 257 bytes exceeds max_id_len 256`},
		{name: "header id of 256 bytes", topic: "like", value: `{}`, headers: []Header{{Key: "id", Value: []byte(x(256))}},
			want: map[string]any{"id": x(256)}},

		// event-time floor
		{name: "ts 0", topic: "like", value: `{"anchor_id":"a","ts":0}`,
			err: `validation: field "ts": event time 1970-01-01T00:00:00Z is before min_time 2000-01-01T00:00:00Z`},
		{name: "ts 1 ms before 2000", topic: "like", value: `{"ts":946684799999}`,
			err: `validation: field "ts": event time 1999-12-31T23:59:59.999Z is before min_time 2000-01-01T00:00:00Z`},
		{name: "ts at 2000-01-01", topic: "like", value: `{"ts":946684800000}`, want: map[string]any{"ts": int64(946684800000)}},
		{name: "message timestamp before 2000", topic: "gift", value: `{}`, msgTime: time.Date(1999, 6, 1, 0, 0, 0, 0, time.UTC),
			err: `validation: message timestamp: event time 1999-06-01T00:00:00Z is before min_time 2000-01-01T00:00:00Z`},
		{name: "ts after 2000", topic: "gift", value: fmt.Sprintf(`{"ts":%d}`, ms), want: map[string]any{"ts": ms}},
	}
	ss := testSchemas(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mt := msgTime
			if !tt.msgTime.IsZero() {
				mt = tt.msgTime
			}
			ev, err := ss[tt.topic].Decode(tt.topic, 3, 42, []byte(tt.value), tt.headers, mt)
			if tt.err != "" {
				if err == nil {
					t.Fatalf("accepted: %+v", ev.Fields())
				}
				if !IsPermanent(err) || Reason(err) != ReasonValidation || err.Error() != tt.err {
					t.Fatalf("err\n got %v\nwant %s", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tt.want {
				if got := ev.Fields()[k]; got != v {
					t.Errorf("Fields[%q] = %.40q, want %.40q", k, got, v)
				}
			}
		})
	}
}

// TestDecodeCustomBounds checks min, max and max_len on a schema of its own,
// for int and float fields, and that zero limits are no limits.
func TestDecodeCustomBounds(t *testing.T) {
	s := &Schema{IDField: "id", TSField: "ts", MaxIDLen: 4, MinTime: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), Fields: []Field{
		{Name: "level", Type: TypeInt, Min: int64(-3), Max: int64(10), Default: int64(0)},
		{Name: "ratio", Type: TypeFloat, Min: 0.5, Max: 2.25},
		{Name: "name", Type: TypeString, MaxLen: 3},
		{Name: "free", Type: TypeString},
		{Name: "big", Type: TypeInt},
		{Name: "vip", Type: TypeBool},
	}}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		value string
		want  map[string]any
		err   string
	}{
		{`{"level":-3,"ratio":0.5,"name":"abc"}`, map[string]any{"level": int64(-3), "ratio": 0.5, "name": "abc"}, ""},
		{`{"level":10,"ratio":2.25}`, map[string]any{"level": int64(10), "ratio": 2.25}, ""},
		{`{"level":1e1}`, map[string]any{"level": int64(10)}, ""},
		{`{}`, map[string]any{"level": int64(0), "ratio": 0.0, "name": ""}, ""}, // missing: default or zero value, not checked
		{`{"level":-4}`, nil, `validation: field "level": -4 is below min -3`},
		{`{"level":11}`, nil, `validation: field "level": 11 is above max 10`},
		{`{"level":1.1e1}`, nil, `validation: field "level": 11 is above max 10`},
		{`{"ratio":0.49}`, nil, `validation: field "ratio": 0.49 is below min 0.5`},
		{`{"ratio":2.2500001}`, nil, `validation: field "ratio": 2.2500001 is above max 2.25`},
		{`{"ratio":3}`, nil, `validation: field "ratio": 3 is above max 2.25`},
		{`{"name":"abcd"}`, nil, `validation: field "name": 4 bytes exceed max_len 3`},
		{`{"name":1234}`, nil, `validation: field "name": 4 bytes exceed max_len 3`}, // an integer as its text
		{`{"name":"é"}`, map[string]any{"name": "é"}, ""},
		{`{"name":"éé"}`, nil, `validation: field "name": 4 bytes exceed max_len 3`},
		{`{"free":"` + strings.Repeat("y", 5000) + `","big":-9223372036854775808}`, map[string]any{"big": int64(-9223372036854775808)}, ""},
		{`{"id":"abcd"}`, map[string]any{"id": "abcd"}, ""},
		{`{"id":"abcde"}`, nil, `validation: field "id": message ID of 5 bytes exceeds max_id_len 4`},
		{`{"id":12345}`, nil, `validation: field "id": message ID of 5 bytes exceeds max_id_len 4`},
		{`{"ts":1577836800000}`, map[string]any{"ts": int64(1577836800000)}, ""},
		{`{"ts":1577836799000}`, nil, `validation: field "ts": event time 2019-12-31T23:59:59Z is before min_time 2020-01-01T00:00:00Z`},
		// the first violation in field order is reported
		{`{"name":"abcd","level":99}`, nil, `validation: field "level": 99 is above max 10`},
	}
	for _, tt := range tests {
		t.Run(tt.value[:min(len(tt.value), 40)], func(t *testing.T) {
			// The fallback ID (topic/partition/offset) is not the message's:
			// it is not bounded by MaxIDLen.
			ev, err := s.Decode("t", 3, 42, []byte(tt.value), nil, at)
			if tt.err != "" {
				if err == nil || Reason(err) != ReasonValidation || err.Error() != tt.err {
					t.Fatalf("err\n got %v\nwant %s", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tt.want {
				if got := ev.Fields()[k]; got != v {
					t.Errorf("Fields[%q] = %#v, want %#v", k, got, v)
				}
			}
		})
	}

	// Zero limits: no limit.
	open := &Schema{IDField: "id", TSField: "ts", Fields: []Field{{Name: "n", Type: TypeInt}, {Name: "s", Type: TypeString}}}
	if err := open.Validate(); err != nil {
		t.Fatal(err)
	}
	ev, err := open.Decode("t", 0, 1, []byte(`{"id":"`+strings.Repeat("i", 5000)+`","ts":0,"n":-1000000,"s":"`+strings.Repeat("s", 5000)+`"}`), nil, time.Time{})
	if err != nil || len(ev.ID) != 5000 || ev.Time.UnixMilli() != 0 || ev.Fields()["n"] != int64(-1000000) {
		t.Fatalf("open schema: %v, %v", ev, err)
	}
}

func TestSchemaValidateLimits(t *testing.T) {
	schema := func(fs ...Field) Schema { return Schema{IDField: "id", TSField: "ts", Fields: fs} }
	tests := []struct {
		name string
		s    Schema
		err  string // the whole error
	}{
		{"min on a string", schema(Field{Name: "a", Type: TypeString, Min: int64(1)}), `field "a": min is only for int and float fields, not string`},
		{"max on a bool", schema(Field{Name: "a", Type: TypeBool, Max: int64(1)}), `field "a": max is only for int and float fields, not bool`},
		{"int min of Go int", schema(Field{Name: "a", Type: TypeInt, Min: 1}), `field "a": min 1 (int) is not a Go int64`},
		{"float max of Go int64", schema(Field{Name: "a", Type: TypeFloat, Max: int64(1)}), `field "a": max 1 (int64) is not a Go float64`},
		{"NaN min", schema(Field{Name: "a", Type: TypeFloat, Min: math.NaN()}), `field "a": min NaN is not finite`},
		{"min above max", schema(Field{Name: "a", Type: TypeInt, Min: int64(5), Max: int64(4)}), `field "a": min 5 is above max 4`},
		{"float min above max", schema(Field{Name: "a", Type: TypeFloat, Min: 0.5, Max: 0.25}), `field "a": min 0.5 is above max 0.25`},
		{"default below min", schema(Field{Name: "a", Type: TypeInt, Min: int64(1), Default: int64(0)}), `field "a": default 0: 0 is below min 1`},
		{"default above max", schema(Field{Name: "a", Type: TypeFloat, Max: 1.5, Default: 2.0}), `field "a": default 2: 2 is above max 1.5`},
		{"default too long", schema(Field{Name: "a", Type: TypeString, MaxLen: 2, Default: "abc"}), `field "a": default abc: 3 bytes exceed max_len 2`},
		{"max_len on an int", schema(Field{Name: "a", Type: TypeInt, MaxLen: 5}), `field "a": max_len is only for string fields, not int`},
		{"negative max_len", schema(Field{Name: "a", Type: TypeString, MaxLen: -1}), `field "a": negative max_len -1`},
		{"negative max_id_len", Schema{IDField: "id", TSField: "ts", MaxIDLen: -1}, `negative max_id_len -1`},
		{"negative max_key_len", Schema{IDField: "id", TSField: "ts", MaxKeyLen: -2}, `negative max_key_len -2`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.s.Validate(); err == nil || err.Error() != tt.err {
				t.Fatalf("err\n got %v\nwant %s", err, tt.err)
			}
		})
	}
	for name, s := range DefaultSchemas() {
		if s.MaxIDLen != DefaultMaxIDLen || s.MaxKeyLen != DefaultMaxKeyLen || !s.MinTime.Equal(DefaultMinTime()) {
			t.Errorf("default schema %s: limits %d, %d, %v", name, s.MaxIDLen, s.MaxKeyLen, s.MinTime)
		}
	}
	if DefaultMaxIDLen != 256 || DefaultMaxKeyLen != 256 || !DefaultMinTime().Equal(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("defaults %d, %d, %v", DefaultMaxIDLen, DefaultMaxKeyLen, DefaultMinTime())
	}
}

// TestRouteKeyLimits checks that members and dims values computed by
// routing are bounded by the schema's MaxKeyLen, including members that
// fields bounded one by one add up to.
func TestRouteKeyLimits(t *testing.T) {
	ss := testSchemas(t)
	ss["chat"] = &Schema{IDField: "id", TSField: "ts", MaxKeyLen: 8, Fields: []Field{
		{Name: "anchor_id", Type: TypeString}, {Name: "zone", Type: TypeString}, {Name: "n", Type: TypeInt},
	}}
	routes := append(testRoutes(),
		Route{Topic: "chat", Member: "anchor_id", Boards: []string{"anchor_hot_zone_30m"}},
		Route{Topic: "chat", When: "n == 2", Member: "anchor_id + anchor_id", Boards: []string{"anchor_total"}},
		Route{Topic: "chat", When: "n == 3", Member: "n * 1000000000", Boards: []string{"anchor_total"}},
		Route{Topic: "gift", When: `gift_id == "combo"`, Member: "anchor_id + user_id", Boards: []string{"anchor_total"}},
	)
	r, err := NewRouter(testBoards(t), ss, routes)
	if err != nil {
		t.Fatal(err)
	}
	x := func(n int) string { return strings.Repeat("x", n) }
	tests := []struct {
		name, topic, value string
		want               string // brief of the updates
		err                string // the whole error
	}{
		{"member and zone of 8 bytes", "chat", `{"anchor_id":"` + x(8) + `","zone":"` + x(8) + `"}`,
			"anchor_hot_zone_30m[xxxxxxxx] xxxxxxxx 1; ", ""},
		{"member of 9 bytes", "chat", `{"anchor_id":"` + x(9) + `","zone":"z"}`,
			"", `validation: member from "anchor_id": 9 bytes exceed max_key_len 8`},
		{"dims value of 9 bytes", "chat", `{"anchor_id":"a","zone":"` + x(9) + `"}`,
			"", `validation: board "anchor_hot_zone_30m": dims field "zone": 9 bytes exceed max_key_len 8`},
		{"computed member of 10 bytes", "chat", `{"anchor_id":"abcde","zone":"z","n":2}`,
			"", `validation: member from "anchor_id + anchor_id": 10 bytes exceed max_key_len 8`},
		{"computed member of 8 bytes", "chat", `{"anchor_id":"abcd","zone":"z","n":2}`,
			"anchor_hot_zone_30m[z] abcd 1; anchor_total[] abcdabcd 1; ", ""},
		{"integer member of 10 digits", "chat", `{"anchor_id":"a","zone":"z","n":3}`,
			"", `validation: member from "n * 1000000000": 10 bytes exceed max_key_len 8`},
		{"default schema: two fields of 200 bytes", "gift", `{"anchor_id":"` + x(200) + `","user_id":"` + x(200) + `","room_id":"r","zone":"z","gift_id":"combo","count":1}`,
			"", `validation: member from "anchor_id + user_id": 400 bytes exceed max_key_len 256`},
		{"default schema: 256 bytes", "gift", `{"anchor_id":"` + x(200) + `","user_id":"` + x(56) + `","room_id":"r","zone":"z","gift_id":"combo","count":1}`,
			"", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := ss[tt.topic].Decode(tt.topic, 0, 7, []byte(tt.value), nil, testNow.Add(-time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			ups, err := r.Route(ev)
			if tt.err != "" {
				if err == nil || Reason(err) != ReasonValidation || err.Error() != tt.err || ups != nil {
					t.Fatalf("Route = %s, %v\nwant error %s", brief(ups), err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.want != "" && brief(ups) != tt.want {
				t.Fatalf("updates\n got %s\nwant %s", brief(ups), tt.want)
			}
			if tt.topic == "gift" && ups[len(ups)-1].Member != x(200)+x(56) {
				t.Fatalf("combo member %.20q", ups[len(ups)-1].Member)
			}
		})
	}
}
