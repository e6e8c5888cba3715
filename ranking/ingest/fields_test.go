package ingest

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"
	"unsafe"
)

// TestParseIntBytes: the copy-free parse of plain integers agrees with
// parseInt, values and errors, on both sides of its 18-digit limit.
func TestParseIntBytes(t *testing.T) {
	ins := []string{"0", "-0", "7", "-7", "120", "999999999999999999", "-999999999999999999",
		"1000000000000000000", "9223372036854775807", "-9223372036854775808", "9223372036854775808",
		"-9223372036854775809", "1.0", "1e3", "1.5", "-2.50e1", "123456789012345678901234"}
	for d := 1; d <= 19; d++ {
		ins = append(ins, "1"+fmt.Sprintf("%0*d", d-1, 0), "-"+strconv.Itoa(d)+fmt.Sprintf("%0*d", d-1, 0))
	}
	for _, in := range ins {
		got, gerr := parseIntBytes([]byte(in))
		want, werr := parseInt(in)
		if got != want || fmt.Sprint(gerr) != fmt.Sprint(werr) || Reason(gerr) != Reason(werr) {
			t.Errorf("parseIntBytes(%s) = %d, %v; parseInt: %d, %v", in, got, gerr, want, werr)
		}
	}
}

// TestEventFields: a decoded event's Fields and Field give every field of
// the schema typed as declared, defaults included; an event of NewEvent
// gives its map.
func TestEventFields(t *testing.T) {
	s := &Schema{IDField: "id", TSField: "ts", Fields: []Field{
		{Name: "name", Type: TypeString}, {Name: "n", Type: TypeInt, Default: int64(5)},
		{Name: "x", Type: TypeFloat}, {Name: "ok", Type: TypeBool}, {Name: "num_id", Type: TypeString},
		{Name: "esc", Type: TypeString}, {Name: "f", Type: TypeBool, Default: true},
	}}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	ev, err := s.Decode("t", 1, 2, []byte(`{"id":"e1","ts":1000,"name":"ann","x":-2.5,"ok":true,"num_id":12,"esc":"a\"b","f":null}`), nil, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"id": "e1", "ts": int64(1000), "name": "ann", "n": int64(5), "x": -2.5, "ok": true,
		"num_id": "12", "esc": `a"b`, "f": true}
	if got := ev.Fields(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Fields = %#v, want %#v", got, want)
	}
	for k, v := range want {
		if got, ok := ev.Field(k); !ok || got != v {
			t.Errorf("Field(%q) = %#v, %v; want %#v", k, got, ok, v)
		}
	}
	if v, ok := ev.Field("nope"); ok || v != nil {
		t.Errorf("Field(nope) = %v, %v", v, ok)
	}
	if !slices.Equal(ev.Missing, []string{"n", "f"}) {
		t.Errorf("Missing = %q", ev.Missing)
	}
	ev.Fields()["name"] = "changed"
	if v, _ := ev.Field("name"); v != "ann" {
		t.Errorf("Fields is not a copy: name = %v", v)
	}

	hand := NewEvent("t", "h1", time.UnixMilli(1), map[string]any{"n": int64(3)})
	if got := hand.Fields(); !reflect.DeepEqual(got, map[string]any{"n": int64(3)}) {
		t.Errorf("NewEvent Fields = %#v", got)
	}
	if v, ok := hand.Field("n"); !ok || v != int64(3) {
		t.Errorf("NewEvent Field(n) = %v, %v", v, ok)
	}
	if _, ok := hand.Field("x"); ok {
		t.Error("NewEvent Field(x) exists")
	}
}

// TestRouteOtherSchema: an event decoded with a schema whose fields differ
// from the router's (another order, a field fewer) routes like one built by
// hand with its fields; a schema with the same fields routes by position.
func TestRouteOtherSchema(t *testing.T) {
	r := testRouter(t)
	value := `{"id":"g9","ts":1763700000000,"user_id":"u1","anchor_id":"a1","room_id":"r1","zone":"z1","gift_id":"ice_castle","count":2,"coins":520}`
	want, err := r.Route(decodeT(t, "gift", value))
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != 7 {
		t.Fatalf("%d updates: %s", len(want), brief(want))
	}
	same := testSchemas(t)["gift"]
	other := *same
	other.Fields = slices.Clone(same.Fields)
	slices.Reverse(other.Fields)
	fewer := *same
	fewer.Fields = slices.DeleteFunc(slices.Clone(same.Fields), func(f Field) bool { return f.Name == "gift_id" })
	for name, s := range map[string]*Schema{"same": same, "reordered": &other, "fewer": &fewer} {
		ev, err := s.Decode("gift", 0, 7, []byte(value), nil, testNow.Add(-time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.Route(ev)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		w := want
		if name == "fewer" { // no gift_id: not an ice castle
			w = want[2:]
		}
		if brief(got) != brief(w) || !reflect.DeepEqual(got, w) {
			t.Errorf("%s: %s, want %s", name, brief(got), brief(w))
		}
	}
}

// TestRouteEnvVariable: expressions that read fields through $env see them
// (the environment of a decoded event otherwise holds only the fields the
// expressions name).
func TestRouteEnvVariable(t *testing.T) {
	r := testRouter(t, Route{Topic: "game", When: `$env.ok`, Member: `$env["player"]`, Score: "$env.level + len($env)",
		Boards: []string{"anchor_total"}})
	ups, err := r.Route(decodeT(t, "game", `{"player":"p1","level":3,"ok":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := brief(ups); got != "anchor_total[] p1 11; " {
		t.Fatalf("updates %s", got)
	}
}

// TestRouteShortcuts: expressions that are a field or a number constant
// (run without the VM) route exactly like equivalent expressions the VM
// runs: the same updates, or the same error.
func TestRouteShortcuts(t *testing.T) {
	short := []Route{
		{Topic: "game", Member: "player", Sort: map[string]string{"clear_ms": "clear_ms", "vip": "3"}, Boards: []string{"stage"}},
		{Topic: "game", When: "ok", Member: "level", Score: "x", Boards: []string{"ratio"}},
		{Topic: "game", When: "!ok", Member: "id", Score: "2.5", Base: "level", Boards: []string{"hot_news"}},
		{Topic: "game", When: "!ok", Member: "player", Score: "ts", Boards: []string{"anchor_total"}},
	}
	vmRun := []Route{
		{Topic: "game", Member: `player + ""`, Sort: map[string]string{"clear_ms": "clear_ms + 0", "vip": "ok ? 3 : 3"}, Boards: []string{"stage"}},
		{Topic: "game", When: "ok", Member: "level + 0", Score: "x + 0", Boards: []string{"ratio"}},
		{Topic: "game", When: "!ok", Member: `id + ""`, Score: "ok ? 2.5 : 2.5", Base: "level + 0", Boards: []string{"hot_news"}},
		{Topic: "game", When: "!ok", Member: `player + ""`, Score: "ts + 0", Boards: []string{"anchor_total"}},
	}
	rs, rv := testRouter(t, short...), testRouter(t, vmRun...)
	if tr := rs.topics["game"]; tr.routes[1].memberSC.field < 0 || !tr.routes[2].scoreSC.konst || tr.routes[0].sortSC[0].field < 0 {
		t.Fatal("shortcuts not taken")
	}
	if tr := rv.topics["game"]; tr.routes[1].memberSC.field >= 0 || tr.routes[2].scoreSC.konst {
		t.Fatal("shortcuts taken for VM expressions")
	}
	events := []*Event{
		decodeT(t, "game", `{"id":"g1","player":"p","clear_ms":3,"vip":2,"level":7,"ok":true,"x":1.255}`),
		decodeT(t, "game", `{"id":"g2","player":"","clear_ms":-1,"level":-4,"ok":true,"x":-0.125}`),
		decodeT(t, "game", `{"player":"q","clear_ms":2000000,"level":3,"ok":false,"x":1e300}`),
		decodeT(t, "game", `{"player":"q","level":9007199254740993,"ok":true,"x":-1}`),
		NewEvent("game", "h1", testNow, map[string]any{"player": "h", "level": int64(2), "ok": true, "x": math.NaN()}),
		NewEvent("game", "h2", testNow, map[string]any{"player": "h", "level": int64(2), "ok": true, "x": math.Inf(-1)}),
		NewEvent("game", "h3", testNow, map[string]any{"player": "h", "level": int64(5)}),
		NewEvent("game", "h4", testNow, map[string]any{"player": 5}),
	}
	for i, ev := range events {
		got, gerr := rs.Route(ev)
		want, werr := rv.Route(ev)
		same := fmt.Sprint(gerr) == fmt.Sprint(werr)
		if Reason(gerr) == ReasonNoMember { // the error quotes the member expression
			same = Reason(werr) == ReasonNoMember
		}
		if !reflect.DeepEqual(got, want) || !same {
			t.Errorf("event %d: shortcuts %s, %v; VM %s, %v", i, brief(got), gerr, brief(want), werr)
		}
	}
}

// TestDecodeTo: decoding into a reused event gives what Decode gives,
// whatever the event held before; a failed DecodeTo leaves no event.
func TestDecodeTo(t *testing.T) {
	ss := testSchemas(t)
	msgs := []struct{ topic, value string }{
		{"gift", `{"id":"g1","ts":1763700000000,"user_id":"u1","anchor_id":"a1","room_id":"r1","zone":"z","gift_id":"rose","count":3,"coins":3}`},
		{"like", `{"id":"l1","ts":1763700000001,"anchor_id":"a2"}`},
		{"comment", `{"ts":1763700000002,"anchor_id":"a3","text":"hi","news_id":"n1","news_ts":1763600000000}`},
		{"like", `{"id":"l2","anchor_id":"a4","count":2,"room_id":"r9"}`},
		{"gift", `{"id":"bad","coins":-1}`},
		{"like", `{"id":"l3","ts":1763700000003,"anchor_id":"a5","count":5}`},
	}
	var ev Event
	for i, m := range msgs {
		want, werr := ss[m.topic].Decode(m.topic, 1, int64(i), []byte(m.value), nil, testNow)
		gerr := ss[m.topic].DecodeTo(&ev, m.topic, 1, int64(i), []byte(m.value), nil, testNow)
		if fmt.Sprint(gerr) != fmt.Sprint(werr) {
			t.Fatalf("message %d: DecodeTo error %v, Decode %v", i, gerr, werr)
		}
		if werr != nil {
			if ev.ID != "" || ev.Topic != "" || !ev.Time.IsZero() || ev.Missing != nil || len(ev.Fields()) != 0 {
				t.Fatalf("message %d: a failed DecodeTo left %+v", i, ev)
			}
			continue
		}
		if ev.Topic != want.Topic || ev.Partition != want.Partition || ev.Offset != want.Offset || ev.ID != want.ID ||
			!ev.Time.Equal(want.Time) || !slices.Equal(ev.Missing, want.Missing) || !reflect.DeepEqual(ev.Fields(), want.Fields()) {
			t.Fatalf("message %d: DecodeTo gave %+v %v, Decode %+v %v", i, ev, ev.Fields(), want, want.Fields())
		}
	}
}

// TestDecodeToKept: DecodeToKept gives what DecodeTo gives, and its
// strings point into the value instead of into a copy (DecodeTo's do
// not: its caller may write the value afterwards).
func TestDecodeToKept(t *testing.T) {
	ss := testSchemas(t)
	value := []byte(`{"id":"g1","ts":1763700000000,"user_id":"u1","anchor_id":"a1","room_id":"r1","zone":"z","gift_id":"rose","count":3,"coins":3}`)
	inside := func(s string) bool {
		p, lo := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(&value[0]))
		return p >= lo && p < lo+uintptr(len(value))
	}
	var kept, copied Event
	if err := ss["gift"].DecodeToKept(&kept, "gift", 1, 7, value, nil, testNow); err != nil {
		t.Fatal(err)
	}
	if err := ss["gift"].DecodeTo(&copied, "gift", 1, 7, value, nil, testNow); err != nil {
		t.Fatal(err)
	}
	if kept.ID != "g1" || kept.ID != copied.ID || !reflect.DeepEqual(kept.Fields(), copied.Fields()) {
		t.Fatalf("DecodeToKept gave %q %v, DecodeTo %q %v", kept.ID, kept.Fields(), copied.ID, copied.Fields())
	}
	if !inside(kept.ID) {
		t.Errorf("DecodeToKept's ID %q is a copy", kept.ID)
	}
	if inside(copied.ID) {
		t.Errorf("DecodeTo's ID %q points into the value", copied.ID)
	}
}
