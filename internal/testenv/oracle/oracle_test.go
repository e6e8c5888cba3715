package oracle

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/rankd/rankd/ranking"
)

const (
	applied = ranking.StatusApplied
	dup     = ranking.StatusDuplicate
	late    = ranking.StatusLate
	oor     = ranking.StatusOutOfRange
)

func unit(t *testing.T, s string) ranking.Unit {
	t.Helper()
	u, err := ranking.ParseUnit(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// at returns 2026-11-21 (UTC) plus d.
func at(d time.Duration) time.Time {
	return time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC).Add(d)
}

func up(board, member string, v int64, t time.Time, msg string) ranking.Update {
	return ranking.Update{Board: board, Member: member, Value: v, Time: t, MsgID: msg}
}

// ents is a compact form of []Entry for table tests: "member=value@tie".
func ents(es []Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = fmt.Sprintf("%s=%d@%d", e.Member, e.Value, e.Tie)
	}
	return out
}

func checkStatus(t *testing.T, got, want []ranking.Status) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("statuses = %v, want %v", got, want)
	}
}

func checkBoard(t *testing.T, o *Oracle, board string, dims []string, period string, want ...string) {
	t.Helper()
	got := ents(o.Board(board, dims, period))
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s %v %s = %v, want %v", board, dims, period, got, want)
	}
}

func TestAggregates(t *testing.T) {
	h := time.Hour
	tests := []struct {
		name  string
		board ranking.Board
		ups   []ranking.Update
		want  []string // board "b", period 20261121
	}{
		{
			name:  "sum desc first",
			board: ranking.Board{Aggregate: ranking.AggSum, Tiebreak: ranking.TieFirst},
			ups: []ranking.Update{
				up("b", "x", 3, at(h+1500*time.Millisecond), "1"), // tie 3601 (1s unit)
				up("b", "y", 5, at(2*h), "2"),
				up("b", "x", 2, at(3*h), "3"), // x=5, tie max -> 10800
				up("b", "z", 5, at(30*time.Minute), "4"),
				up("b", "y", 0, at(h), "5"), // older: tie stays 7200
				up("b", "w", -1, at(0), "6"),
			},
			want: []string{"z=5@1800", "y=5@7200", "x=5@10800", "w=-1@0"},
		},
		{
			name:  "sum desc last",
			board: ranking.Board{Aggregate: ranking.AggSum, Tiebreak: ranking.TieLast},
			ups: []ranking.Update{
				up("b", "x", 1, at(h), "1"),
				up("b", "y", 1, at(2*h), "2"),
				up("b", "z", 1, at(2*h+500*time.Millisecond), "3"), // same second as y
			},
			want: []string{"z=1@7200", "y=1@7200", "x=1@3600"},
		},
		{
			name:  "sum asc none",
			board: ranking.Board{Aggregate: ranking.AggSum, Order: ranking.Asc},
			ups: []ranking.Update{
				up("b", "b", 1, at(h), "1"),
				up("b", "a", 1, at(2*h), "2"),
				up("b", "c", 0, at(3*h), "3"),
			},
			want: []string{"c=0@0", "a=1@0", "b=1@0"},
		},
		{
			name:  "sum desc none: members descending",
			board: ranking.Board{Aggregate: ranking.AggSum},
			ups: []ranking.Update{
				up("b", "a", 1, at(h), "1"),
				up("b", "b", 1, at(2*h), "2"),
				up("b", "B", 1, at(3*h), "3"),
			},
			want: []string{"b=1@0", "a=1@0", "B=1@0"},
		},
		{
			name:  "max desc first",
			board: ranking.Board{Aggregate: ranking.AggMax, Tiebreak: ranking.TieFirst},
			ups: []ranking.Update{
				up("b", "x", 7, at(5*h), "1"),
				up("b", "x", 7, at(2*h), "2"), // equal: tie min -> 7200
				up("b", "x", 6, at(h), "3"),   // lower: ignored
				up("b", "y", 7, at(3*h), "4"),
				up("b", "y", 7, at(4*h), "5"), // equal, later: tie stays
				up("b", "z", 3, at(h), "6"),
				up("b", "z", 4, at(6*h), "7"), // better: tie = its time
			},
			want: []string{"x=7@7200", "y=7@10800", "z=4@21600"},
		},
		{
			name:  "max asc last",
			board: ranking.Board{Aggregate: ranking.AggMax, Order: ranking.Asc, Tiebreak: ranking.TieLast},
			ups: []ranking.Update{
				up("b", "x", 2, at(h), "1"),
				up("b", "y", 2, at(2*h), "2"),
				up("b", "z", -4, at(3*h), "3"),
				up("b", "z", -5, at(4*h), "4"), // lower: ignored
			},
			want: []string{"z=-4@10800", "y=2@7200", "x=2@3600"},
		},
		{
			name:  "min asc first, 1ms ties",
			board: ranking.Board{Aggregate: ranking.AggMin, Order: ranking.Asc, Tiebreak: ranking.TieFirst, TieUnit: time.Millisecond},
			ups: []ranking.Update{
				up("b", "x", 9, at(h), "1"),
				up("b", "x", 8, at(3*h), "2"), // better
				up("b", "y", 8, at(2*h), "3"),
				up("b", "y", 8, at(h), "4"), // equal, earlier
				up("b", "z", 8, at(h+time.Millisecond), "5"),
			},
			want: []string{"y=8@3600000", "z=8@3600001", "x=8@10800000"},
		},
		{
			name:  "last by exact time then msg id",
			board: ranking.Board{Aggregate: ranking.AggLast, Tiebreak: ranking.TieFirst, TieUnit: time.Minute},
			ups: []ranking.Update{
				up("b", "x", 1, at(2*h), "e5"),
				up("b", "x", 2, at(h), "e6"),                                       // older: ignored
				up("b", "x", 3, at(2*h+59*time.Second+time.Millisecond), "e4"),     // same minute, later, smaller id: wins
				up("b", "x", 4, at(2*h+59*time.Second), "e50"),                     // same minute, 1 ms earlier, larger id: ignored
				up("b", "w", 6, at(2*h+59*time.Second+900*time.Millisecond), "e2"), // same second, later: wins
				up("b", "w", 7, at(2*h+59*time.Second+100*time.Millisecond), "e3"),
				up("b", "y", 4, at(3*h), "e10"),
				up("b", "y", 5, at(3*h), "e9"), // the same ms: "e9" > "e10" bytewise wins
				up("b", "z", 5, at(4*h), "e1"),
			},
			want: []string{"w=6@120", "y=5@180", "z=5@240", "x=3@120"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.board
			b.Name, b.Window, b.Every, b.Grace = "b", ranking.WindowPeriodic, unit(t, "1d"), 24*time.Hour
			o := New([]*ranking.Board{&b})
			st := o.Apply(tt.ups)
			for i, s := range st {
				if s != applied {
					t.Fatalf("update %d: %v", i, s)
				}
			}
			checkBoard(t, o, "b", nil, "20261121", tt.want...)
		})
	}
}

// partitions sets the StreamTime of ups as a log would: part gives the
// partition of each update (nil: all in one), events are runs of one MsgID,
// and an event's stream time is the greatest Time of the earlier events of
// its partition.
func partitions(ups []ranking.Update, part []int) []ranking.Update {
	wm := map[int]time.Time{}
	for s := 0; s < len(ups); {
		e := s + 1
		for e < len(ups) && ups[e].MsgID == ups[s].MsgID {
			e++
		}
		p := 0
		if part != nil {
			p = part[s]
		}
		st := wm[p]
		for k := s; k < e; k++ {
			ups[k].StreamTime = st
			if ups[k].Time.After(wm[p]) {
				wm[p] = ups[k].Time
			}
		}
		s = e
	}
	return ups
}

func TestLateAndStreams(t *testing.T) {
	b := &ranking.Board{Name: "h", Window: ranking.WindowPeriodic, Every: unit(t, "1h"),
		Dims: []string{"zone"}, Tiebreak: ranking.TieLast, Grace: 5 * time.Minute}
	tot := &ranking.Board{Name: "t", Window: ranking.WindowTotal}
	o := New([]*ranking.Board{b, tot})
	z1, z2 := []string{"z1"}, []string{"z2"}
	u := func(dims []string, m string, tm time.Time, id string) ranking.Update {
		x := up("h", m, 1, tm, id)
		x.Dims = dims
		return x
	}
	m := time.Minute
	st := o.Apply(partitions([]ranking.Update{
		u(z1, "a", at(10*time.Hour+4*m), "1"),                                       // st 10:04
		u(z1, "a", at(9*time.Hour+59*m), "2"),                                       // 09:59: end 10:00 + 5m > st: on time
		u(z1, "b", at(10*time.Hour+5*m-time.Millisecond), "3"),                      // st 10:04:59.999
		u(z1, "c", at(9*time.Hour), "4"),                                            // still on time
		u(z1, "d", at(10*time.Hour+5*m), "5"),                                       // st 10:05
		u(z1, "e", at(9*time.Hour+30*m), "6"),                                       // st == end + grace: late
		u(z2, "a", at(9*time.Hour+30*m), "7"),                                       // other partition: own stream time
		u(z1, "a", at(11*time.Hour), "8"),                                           // st 11:00
		u(z1, "a", at(10*time.Hour), "9"),                                           // on time (end 11:00 + 5m)
		u(z1, "a", at(3*time.Hour), "10"),                                           // far late
		{Board: "t", Member: "a", Value: 1, Time: at(-48 * time.Hour), MsgID: "10"}, // same event; total: never late
	}, []int{0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0}))
	checkStatus(t, st, []ranking.Status{applied, applied, applied, applied, applied, late, applied, applied, applied, late, applied})
	checkBoard(t, o, "h", z1, "20261121T0900", "a=1@3540", "c=1@0")
	checkBoard(t, o, "h", z1, "20261121T1000", "a=2@240", "d=1@300", "b=1@299")
	checkBoard(t, o, "h", z2, "20261121T0900", "a=1@1800")
	checkBoard(t, o, "t", nil, "all", "a=1@0")
	if got, want := o.Periods("h", z1), []string{"20261121T0900", "20261121T1000", "20261121T1100"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("periods = %v, want %v", got, want)
	}
	if got := o.Periods("h", []string{"z3"}); got != nil {
		t.Fatalf("periods of unknown dims = %v", got)
	}
	if st, ok := o.StreamTime("h", z1); !ok || !st.Equal(at(11*time.Hour)) {
		t.Fatalf("stream time = %v %v", st, ok)
	}
	want := []Stream{{"h", z1}, {"h", z2}, {"t", nil}}
	if got := o.Streams(); !reflect.DeepEqual(got, want) {
		t.Fatalf("streams = %v, want %v", got, want)
	}
}

func TestDuplicates(t *testing.T) {
	b := &ranking.Board{Name: "h", Window: ranking.WindowPeriodic, Every: unit(t, "1h"), Grace: 5 * time.Minute}
	s := &ranking.Board{Name: "s", Window: ranking.WindowTotal}
	o := New([]*ranking.Board{b, s})
	ev := func(id string, tm time.Time) []ranking.Update {
		return []ranking.Update{up("h", "a", 1, tm, id), up("s", "a", 1, tm, id)}
	}
	var call []ranking.Update
	call = append(call, ev("1", at(10*time.Hour))...)
	call = append(call, ev("1", at(10*time.Hour))...) // contiguous: one event of 4 updates
	call = append(call, ev("2", at(11*time.Hour))...)
	call = append(call, ev("1", at(10*time.Hour))...) // resent: duplicate
	call = append(call, ev("3", at(9*time.Hour))...)  // late on h, applied on s
	checkStatus(t, o.Apply(partitions(call, nil)), []ranking.Status{
		applied, applied, applied, applied,
		applied, applied,
		dup, dup,
		late, applied,
	})
	// A later call: the duplicate of 3 reports its late update again.
	again := append(ev("3", at(9*time.Hour)), ev("2", at(11*time.Hour))...)
	for i := range again {
		again[i].StreamTime = at(11 * time.Hour)
	}
	checkStatus(t, o.Apply(again),
		[]ranking.Status{late, dup, dup, dup})
	checkBoard(t, o, "h", nil, "20261121T1000", "a=2@0")
	checkBoard(t, o, "h", nil, "20261121T1100", "a=1@0")
	checkBoard(t, o, "s", nil, "all", "a=4@0")
}

func TestBase(t *testing.T) {
	b := &ranking.Board{Name: "n", Window: ranking.WindowTotal, HasBase: true}
	nb := &ranking.Board{Name: "x", Window: ranking.WindowTotal} // no base
	o := New([]*ranking.Board{b, nb})
	withBase := func(x ranking.Update, base int64) ranking.Update {
		x.Base, x.HasBase = base, true
		return x
	}
	checkStatus(t, o.Apply([]ranking.Update{
		withBase(up("n", "a", 432, at(0), "1"), 1000), // absent: 1000 + 432
		withBase(up("n", "a", 432, at(0), "2"), 5000), // a greater base wins: 5000 + 2*432
		withBase(up("n", "a", 432, at(0), "3"), 3000), // a smaller one changes nothing: += 432
		up("n", "b", 432, at(0), "4"),                 // no base carried: 0 + 432
		withBase(up("n", "b", 1, at(0), "5"), 100),    // then one: 100 + 433
		withBase(up("x", "a", 1, at(0), "6"), 1000),   // board without base
	}), []ranking.Status{applied, applied, applied, applied, applied, applied})
	checkBoard(t, o, "n", nil, "all", "a=6296@0", "b=533@0")
	checkBoard(t, o, "x", nil, "all", "a=1@0")
	// The same events in another order give the same board.
	o2 := New([]*ranking.Board{b, nb})
	o2.Apply([]ranking.Update{
		withBase(up("n", "b", 1, at(0), "5"), 100),
		withBase(up("n", "a", 432, at(0), "3"), 3000),
		up("n", "b", 432, at(0), "4"),
		withBase(up("n", "a", 432, at(0), "2"), 5000),
		withBase(up("n", "a", 432, at(0), "1"), 1000),
	})
	checkBoard(t, o2, "n", nil, "all", "a=6296@0", "b=533@0")
}

func TestRange(t *testing.T) {
	d1 := unit(t, "1d")
	sum := &ranking.Board{Name: "sum", Window: ranking.WindowPeriodic, Every: d1, Grace: time.Hour}
	roll := &ranking.Board{Name: "roll", Window: ranking.WindowRolling, Every: d1, Periods: 3, Grace: time.Hour}
	mx := &ranking.Board{Name: "max", Window: ranking.WindowPeriodic, Every: d1, Aggregate: ranking.AggMax, Grace: time.Hour}
	sortF := []ranking.SortField{{Name: "t", Order: ranking.Asc, Bits: 10}, {Name: "v", Bits: 4}}
	mf := &ranking.Board{Name: "mf", Window: ranking.WindowPeriodic, Every: d1, Aggregate: ranking.AggMax, Sort: sortF, Grace: time.Hour}
	tf := &ranking.Board{Name: "tf", Window: ranking.WindowTotal, Tiebreak: ranking.TieFirst, TieUnit: time.Minute,
		TieEpoch: at(0), TieHorizon: 10 * 24 * time.Hour}
	tn := &ranking.Board{Name: "tn", Window: ranking.WindowTotal, TieEpoch: at(0)}
	kt := &ranking.Board{Name: "kt", Window: ranking.WindowPeriodic, Every: d1, KeepTop: 2, Grace: time.Hour}
	boards := []*ranking.Board{sum, roll, mx, mf, tf, tn, kt}
	maxv := map[string]int64{}
	for _, b := range boards {
		c, err := ranking.NewCodec(b)
		if err != nil {
			t.Fatal(err)
		}
		maxv[b.Name] = c.MaxValue()
	}
	if maxv["mf"] != 1<<14-1 {
		t.Fatalf("multi-factor max value %d", maxv["mf"])
	}
	o := New(boards)
	h := time.Hour
	rb := maxv["roll"] / 3
	// tf: 1m ties over 10 days need 14 bits: offsets [0, 16384) minutes.
	tfEnd := at(16384 * time.Minute)
	checkStatus(t, o.Apply([]ranking.Update{
		up("sum", "a", maxv["sum"]-1, at(h), "1"),
		up("sum", "a", 1, at(h), "2"),
		up("sum", "a", 1, at(h), "3"), // would pass MaxValue
		up("sum", "b", -maxv["sum"], at(h), "4"),
		up("sum", "b", -1, at(h), "5"),
		up("roll", "a", rb, at(h), "6"),
		up("roll", "a", 1, at(h), "7"), // per-period bound MaxValue/3
		up("roll", "a", rb, at(25*h), "8"),
		up("max", "a", maxv["max"]+1, at(h), "9"),
		up("max", "a", -maxv["max"], at(h), "10"),
		up("mf", "a", -1, at(h), "11"),
		up("mf", "a", maxv["mf"]+1, at(h), "12"),
		up("mf", "a", 0, at(h), "13"),
		up("tf", "a", 1, at(-time.Millisecond), "14"), // before the epoch
		up("tf", "a", 1, tfEnd.Add(-time.Millisecond), "15"),
		up("tf", "a", 1, tfEnd, "16"),
		up("tn", "a", 1, at(-h), "17"), // no tiebreak: no tie range
		up("kt", "a", 0, at(h), "18"),
		up("kt", "a", -1, at(h), "19"),
		up("kt", "a", 2, at(h), "20"),
	}), []ranking.Status{
		applied, applied, oor, applied, oor,
		applied, oor, applied,
		oor, applied,
		oor, oor, applied,
		oor, applied, oor,
		applied,
		oor, oor, applied,
	})
	checkBoard(t, o, "sum", nil, "20261121", fmt.Sprintf("a=%d@0", maxv["sum"]), fmt.Sprintf("b=%d@0", -maxv["sum"]))
	checkBoard(t, o, "roll", nil, "20261122", fmt.Sprintf("a=%d@0", 2*rb))
	checkBoard(t, o, "tf", nil, "all", "a=1@16383")
	checkBoard(t, o, "kt", nil, "20261121", "a=2@0")
}

func TestRollingGap(t *testing.T) {
	b := &ranking.Board{Name: "r3", Window: ranking.WindowRolling, Every: unit(t, "1d"), Periods: 3,
		Tiebreak: ranking.TieFirst, Grace: 2 * 24 * time.Hour}
	o := New([]*ranking.Board{b})
	d := func(day, hour int) time.Time { return time.Date(2026, 11, day, hour, 0, 0, 0, time.UTC) }
	checkStatus(t, o.Apply(partitions([]ranking.Update{
		up("r3", "a", 1, d(17, 1), "1"),
		up("r3", "b", 2, d(17, 2), "2"),
		up("r3", "a", 3, d(18, 3), "3"),
		up("r3", "c", 1, d(21, 4), "4"),
		up("r3", "d", 0, d(20, 5), "5"),  // zero: present all the same
		up("r3", "a", -3, d(19, 6), "6"), // S(19)[a] = 1
		up("r3", "a", -1, d(16, 7), "7"), // late (st 21 04:00 >= 17 00:00 + 2d)
	}, nil)), []ranking.Status{applied, applied, applied, applied, applied, applied, late})
	// Ties are seconds from the start of the window's first period.
	e := func(m string, v int64, hours int) string { return fmt.Sprintf("%s=%d@%d", m, v, hours*3600) }
	checkBoard(t, o, "r3", nil, "20261117", e("b", 2, 50), e("a", 1, 49))
	checkBoard(t, o, "r3", nil, "20261118", e("a", 4, 51), e("b", 2, 26))
	checkBoard(t, o, "r3", nil, "20261119", e("b", 2, 2), e("a", 1, 54))
	checkBoard(t, o, "r3", nil, "20261120", e("a", 0, 30), e("d", 0, 53))
	checkBoard(t, o, "r3", nil, "20261121", e("c", 1, 52), e("d", 0, 29), e("a", -3, 6))
	checkBoard(t, o, "r3", nil, "20261122", e("c", 1, 28), e("d", 0, 5))
	checkBoard(t, o, "r3", nil, "20261124") // past the window: empty
	want := []string{"20261117", "20261118", "20261119", "20261120", "20261121"}
	if got := o.Periods("r3", nil); !reflect.DeepEqual(got, want) {
		t.Fatalf("periods = %v, want %v", got, want)
	}
}

func TestKeepTop(t *testing.T) {
	b := &ranking.Board{Name: "k", Window: ranking.WindowPeriodic, Every: unit(t, "1d"), KeepTop: 2,
		Tiebreak: ranking.TieFirst, Grace: time.Hour}
	o := New([]*ranking.Board{b})
	o.Apply([]ranking.Update{
		up("k", "a", 1, at(time.Hour), "1"),
		up("k", "b", 2, at(2*time.Hour), "2"),
		up("k", "c", 2, at(3*time.Hour), "3"),
		up("k", "a", 1, at(4*time.Hour), "4"), // a = 2, latest
		up("k", "d", 1, at(5*time.Hour), "5"),
	})
	checkBoard(t, o, "k", nil, "20261121", "b=2@7200", "c=2@10800")
	o.Apply([]ranking.Update{up("k", "a", 1, at(6*time.Hour), "6")})
	checkBoard(t, o, "k", nil, "20261121", "a=3@21600", "b=2@7200")
}

func TestWorkload(t *testing.T) {
	boards := Boards()
	a := Workload(7, 2000, boards, GenOptions{})
	if b := Workload(7, 2000, boards, GenOptions{}); !reflect.DeepEqual(a, b) {
		t.Fatal("same seed, different workloads")
	}
	if b := Workload(8, 1000, boards, GenOptions{}); reflect.DeepEqual(a, b) {
		t.Fatal("different seeds, same workload")
	}

	// Every run of one MsgID in a call is a whole event, identical at every
	// delivery: resends are never adjacent to their original.
	events := map[string][]ranking.Update{}
	for i, call := range a {
		for s := 0; s < len(call); {
			e := s + 1
			for e < len(call) && call[e].MsgID == call[s].MsgID {
				e++
			}
			ev := call[s:e]
			if first, ok := events[ev[0].MsgID]; !ok {
				events[ev[0].MsgID] = ev
			} else if !sameEvent(first, ev) {
				t.Fatalf("call %d: event %s differs from its first delivery", i, ev[0].MsgID)
			}
			seen := map[string]bool{}
			for _, u := range ev {
				if seen[u.Board] {
					t.Fatalf("call %d: event %s feeds %s twice", i, u.MsgID, u.Board)
				}
				seen[u.Board] = true
			}
			s = e
		}
	}
	if len(events) < 2000 {
		t.Fatalf("%d distinct events, want 2000", len(events))
	}

	// The workload reaches every status on the boards where it can occur.
	o := New(boards)
	byName := map[string]*ranking.Board{}
	for _, b := range boards {
		byName[b.Name] = b
	}
	count := map[string]map[ranking.Status]int{}
	kinds := map[string]int{} // applied updates per kind of board
	for _, call := range a {
		for i, s := range o.Apply(call) {
			u := call[i]
			b := u.Board
			if count[b] == nil {
				count[b] = map[ranking.Status]int{}
			}
			count[b][s]++
			if s != applied {
				continue
			}
			bd := byName[b]
			if bd.HasBase && u.HasBase {
				kinds["base "+bd.Window.String()]++
				if bd.KeepTop > 0 {
					kinds["base keep_top"]++
				}
				if u.Base > 1e9 {
					kinds["base publish time"]++
				}
			}
			if len(bd.Sort) > 0 {
				kinds["sort "+bd.Aggregate.String()]++
			}
		}
	}
	// Base (hot news) and multi-factor sort boards are covered in every
	// form the config allows them.
	for _, k := range []string{"base total", "base periodic", "base keep_top", "base publish time", "sort max", "sort last"} {
		if kinds[k] < 20 {
			t.Errorf("%d applied updates of kind %q, want at least 20 (all: %v)", kinds[k], k, kinds)
		}
	}
	for _, b := range boards {
		c := count[b.Name]
		if c[applied] < 100 || c[dup] == 0 {
			t.Errorf("%s: %v", b.Name, c)
		}
		if b.Window != ranking.WindowTotal && c[late] == 0 {
			t.Errorf("%s: no late update: %v", b.Name, c)
		}
	}
	for _, name := range []string{"top5_day", "clear_day", "first_total", "hot_day", "stats_last"} {
		if count[name][oor] == 0 {
			t.Errorf("%s: no out-of-range update: %v", name, count[name])
		}
	}
}

// TestFold checks the oracle's incremental state against a direct fold of
// the updates it applied: sum = base + deltas with the latest tie, max/min =
// the best value with the earliest tie among its equals, last = the greatest
// (exact time in ms, MsgID); rolling = sums over the window.
func TestFold(t *testing.T) {
	boards := Boards()
	byName := map[string]*ranking.Board{}
	for _, b := range boards {
		byName[b.Name] = b
	}
	type key struct{ board, dims, period, member string }
	type upd struct {
		u ranking.Update
		q int64 // quantized time from the period base
	}
	applied := map[key][]upd{}
	o := New(boards)
	for _, call := range Workload(3, 2000, boards, GenOptions{}) {
		for i, s := range o.Apply(call) {
			if s != ranking.StatusApplied {
				continue
			}
			u := call[i]
			b := byName[u.Board]
			unit := b.TieUnit
			if unit == 0 {
				unit = time.Second
			}
			id, base := "all", b.TieEpoch
			if base.IsZero() {
				base = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
			}
			if b.Window != ranking.WindowTotal {
				p := b.Calendar().At(u.Time)
				id, base = p.ID, p.Start
			}
			d := u.Time.Sub(base)
			q := int64(d / unit)
			if d < 0 && d%unit != 0 {
				q--
			}
			k := key{u.Board, fmt.Sprint(u.Dims), id, u.Member}
			applied[k] = append(applied[k], upd{u, q})
		}
	}
	// fold returns value and tie of one member of one period.
	fold := func(b *ranking.Board, us []upd) (int64, int64) {
		v, q := us[0].u.Value, us[0].q
		switch b.Aggregate {
		case ranking.AggSum:
			// base boards: the greatest base of the events (0 without one)
			v = 0
			var base int64
			for _, x := range us {
				if b.HasBase && x.u.HasBase {
					base = max(base, x.u.Base)
				}
				v += x.u.Value
				q = max(q, x.q)
			}
			v += base
		case ranking.AggMax, ranking.AggMin:
			for _, x := range us {
				if (b.Aggregate == ranking.AggMax && x.u.Value > v) || (b.Aggregate == ranking.AggMin && x.u.Value < v) {
					v = x.u.Value
				}
			}
			q = math.MaxInt64
			for _, x := range us {
				if x.u.Value == v {
					q = min(q, x.q)
				}
			}
		case ranking.AggLast:
			best := us[0]
			for _, x := range us[1:] {
				xt, bt := x.u.Time.UnixMilli(), best.u.Time.UnixMilli()
				if xt > bt || (xt == bt && x.u.MsgID > best.u.MsgID) {
					best = x
				}
			}
			v, q = best.u.Value, best.q
		}
		return v, q
	}
	type vt struct{ v, tie int64 }
	checked := 0
	for _, s := range o.Streams() {
		b := byName[s.Board]
		cal := b.Calendar()
		unit := b.TieUnit
		if unit == 0 {
			unit = time.Second
		}
		for _, id := range o.Periods(s.Board, s.Dims) {
			want := map[string]vt{}
			window := []string{id}
			if b.Window == ranking.WindowRolling {
				p, _ := cal.Parse(id)
				for range b.Periods - 1 {
					p = cal.Prev(p)
					window = append(window, p.ID)
				}
			}
			wbase, _ := cal.Parse(window[len(window)-1])
			abs := map[string]time.Time{}
			for k, us := range applied {
				if k.board != s.Board || k.dims != fmt.Sprint(s.Dims) || !slices.Contains(window, k.period) {
					continue
				}
				v, q := fold(b, us)
				if b.Window != ranking.WindowRolling {
					want[k.member] = vt{v, q}
					continue
				}
				p, _ := cal.Parse(k.period)
				at := p.Start.Add(time.Duration(q) * unit)
				if a, ok := abs[k.member]; !ok || at.After(a) {
					abs[k.member] = at
				}
				w := want[k.member]
				w.v += v
				want[k.member] = w
			}
			for m, at := range abs {
				w := want[m]
				w.tie = int64(at.Sub(wbase.Start) / unit)
				want[m] = w
			}
			got := o.Board(s.Board, s.Dims, id)
			if n := len(want); b.KeepTop > 0 && n > b.KeepTop {
				if len(got) != b.KeepTop {
					t.Fatalf("%s %v %s: %d entries, want top %d", s.Board, s.Dims, id, len(got), b.KeepTop)
				}
			} else if len(got) != n {
				t.Fatalf("%s %v %s: %d entries, want %d", s.Board, s.Dims, id, len(got), n)
			}
			for _, e := range got {
				w := want[e.Member]
				if b.Tiebreak == ranking.TieNone {
					w.tie = 0
				}
				if e.Value != w.v || e.Tie != w.tie {
					t.Fatalf("%s %v %s: %s = %d@%d, fold gives %d@%d", s.Board, s.Dims, id, e.Member, e.Value, e.Tie, w.v, w.tie)
				}
				checked++
			}
		}
	}
	if checked < 1000 {
		t.Fatalf("only %d entries checked", checked)
	}
}

// sameEvent reports whether two deliveries carry the same updates (a resend
// has the stream time of its own place in the log).
func sameEvent(a, b []ranking.Update) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		x.StreamTime, y.StreamTime = time.Time{}, time.Time{}
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}
