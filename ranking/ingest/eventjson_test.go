package ingest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// refMembers decodes b with encoding/json: the reference scanObject must
// agree with.
func refMembers(b []byte) (map[string]any, bool) {
	if !utf8.Valid(b) || !json.Valid(b) || !bytes.HasPrefix(bytes.TrimLeft(b, " \t\r\n"), []byte("{")) {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, false
	}
	return m, true
}

// checkScan compares scanObject with encoding/json on b.
func checkScan(t *testing.T, b []byte) {
	t.Helper()
	if !utf8.Valid(b) {
		return // Decode rejects it before scanning
	}
	members, err := scanObject(b, nil)
	ref, ok := refMembers(b)
	if (err == nil) != ok {
		t.Fatalf("scanObject(%s) err = %v, encoding/json accepts: %v", short(b), err, ok)
	}
	if !ok {
		return
	}
	got := map[string]any{}
	for _, m := range members {
		var v any
		switch m.val.kind {
		case jsonString:
			v = m.val.str(b)
		case jsonNumber:
			v = json.Number(m.val.raw(b))
		case jsonBool:
			v = m.val.raw(b)[0] == 't'
		case jsonNull:
			v = nil
		default:
			dec := json.NewDecoder(bytes.NewReader(m.val.raw(b)))
			dec.UseNumber()
			if err := dec.Decode(&v); err != nil {
				t.Fatalf("member %q span %q: %v", m.key.str(b), m.val.raw(b), err)
			}
		}
		got[m.key.str(b)] = v
	}
	if !reflect.DeepEqual(got, ref) {
		t.Fatalf("scanObject(%s)\n got %.300v\nwant %.300v", short(b), got, ref)
	}
}

// short quotes b, shortened for messages.
func short(b []byte) string {
	if len(b) > 200 {
		return fmt.Sprintf("%q... (%d bytes)", b[:200], len(b))
	}
	return fmt.Sprintf("%q", b)
}

var scanSeeds = []string{
	`{}`, ` { } `, `{"a":1}`, `{"a":-0.5e+3,"b":[1,{"c":null}],"d":true,"e":false,"f":null}`,
	`{"a":"x\"y\\z\/\b\f\n\r\t\u00e9\ud83d\ude00"}`, `{"\u0061":1,"a":2}`, `{"a":"\ud800"}`, `{"a":"\ud800\u0041"}`,
	`{"a":"\udc00\ud800"}`, `{"a":"\ud83d\\ude00"}`, `{"a":"\ud83d\ude0"}`,
	`{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":1e}`, `{"a":-}`, `{"a":+1}`, `{"a":tru}`, `{"a":nul}`,
	`{"a":1,}`, `{,}`, `{"a" 1}`, `{"a":1 "b":2}`, `{"a":[1,]}`, `{"a":[1 2]}`, `{"a":{"b"}}`, `[{}]`, `"x"`, ``, ` `,
	`{"a":1}x`, `{"a":1}{}`, "{\"a\":\"\x01\"}", `{"a":"\x"}`, `{"a":"\u12G4"}`, `{"a`, `{"a":"b`, `{"a":[`, `{"a":{`,
	`{"a":1} `, "\t{\"a\":1}\n", `{"a":[[[[]]]]}`, `{"a":"é😀"}`, `{"":""}`,
	strings.Repeat("[", 10001), `{"a":` + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + `}`,
	`{"a":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`,
}

func TestScanObject(t *testing.T) {
	for _, s := range scanSeeds {
		checkScan(t, []byte(s))
	}
}

// FuzzDecode checks the scanner against encoding/json, and that decoding
// and routing never panic and fail only with permanent errors.
func FuzzDecode(f *testing.F) {
	for _, s := range scanSeeds {
		if len(s) < 1000 {
			f.Add("gift", []byte(s))
		}
	}
	f.Add("gift", []byte(`{"id":"g1","ts":1763700000000,"user_id":"u","anchor_id":"a","room_id":"r","zone":"z","gift_id":"ice_castle","count":2,"coins":500}`))
	f.Add("gift", []byte(`{"anchor_id":7,"coins":1e3,"count":-0,"zone":null}`))
	f.Add("like", []byte(`{"anchor_id":"a","count":9223372036854775807}`))
	f.Add("comment", []byte(`{"news_id":"n","news_ts":-9223372036854775808}`))
	f.Add("comment", []byte(`{"news_id":"n","news_ts":1.5}`))
	ss := testSchemas(f)
	r := testRouter(f)
	f.Fuzz(func(t *testing.T, topic string, b []byte) {
		checkScan(t, b)
		s := ss[topic]
		if s == nil {
			return
		}
		ev, err := s.Decode(topic, 1, 2, b, nil, testNow)
		if err != nil {
			if !IsPermanent(err) {
				t.Fatalf("Decode: non-permanent error %v", err)
			}
			return
		}
		ups, err := r.Route(ev)
		if err != nil && !IsPermanent(err) {
			t.Fatalf("Route: non-permanent error %v", err)
		}
		for _, u := range ups {
			if u.Member == "" || u.MsgID != ev.ID || !utf8.ValidString(u.Member) {
				t.Fatalf("bad update %+v", u)
			}
		}
	})
}

func TestJSONUnescape(t *testing.T) {
	for in, want := range map[string]string{
		`a\nb`:                 "a\nb",
		`\u00e9`:               "é",
		`\ud83d\ude00`:         "😀",
		`\ud83d`:               "\uFFFD",
		`\ud83dx`:              "\uFFFDx",
		`\ud83d\u0041`:         "\uFFFDA",
		`\/\\\"`:               `/\"`,
		`\ud83d\ude00\u00e9zz`: "😀ézz",
	} {
		if got := jsonUnescape([]byte(in)); got != want {
			t.Errorf("jsonUnescape(%q) = %q, want %q", in, got, want)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	s := testSchemas(b)["gift"]
	msg := []byte(`{"id":"g1","ts":1763700000000,"user_id":"u123456","anchor_id":"a4242","room_id":"r77","zone":"3","gift_id":"ice_castle","count":2,"coins":5200}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Decode("gift", 0, 1, msg, nil, time.Time{}); err != nil {
			b.Fatal(err)
		}
	}
}
