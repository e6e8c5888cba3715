package store

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rankd/rankd/ranking"
)

// readOrder returns the names a script reads into the table literal that
// starts with start ("local g = {"), in order: the fields assigned nx() or
// nn().
func readOrder(t *testing.T, script, start string) []string {
	t.Helper()
	src, err := os.ReadFile("lua/" + script)
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	i := strings.Index(s, start)
	if i < 0 {
		t.Fatalf("%s has no %q", script, start)
	}
	end := strings.Index(s[i:], "}")
	var names []string
	for _, m := range regexp.MustCompile(`(\w+) = n[xn]\(\)`).FindAllStringSubmatch(s[i:i+end], -1) {
		names = append(names, m[1])
	}
	return names
}

// TestLuaContract pins the Go side of contract.go to the scripts, every
// script of lua/: the KEYS and ARGV fields are read in the order of the Go
// field lists, each encoder writes exactly that many values, the scripts
// compare against the generated constants and never against bare numbers
// or literal key parts, fields and ops, and every enum value of the model
// has a Lua number.
func TestLuaContract(t *testing.T) {
	if got := readOrder(t, "apply.lua", "local b = {"); !slices.Equal(got, boardFields) {
		t.Errorf("apply.lua reads a board as\n%v\ncontract.go boardFields is\n%v", got, boardFields)
	}
	if n := len((&boardArgs{}).add(nil)); n != len(boardFields) {
		t.Errorf("boardArgs.add writes %d values, boardFields has %d", n, len(boardFields))
	}
	if got := readOrder(t, "apply.lua", "local g = {"); !slices.Equal(got, groupFields) {
		t.Errorf("apply.lua reads a group as\n%v\ncontract.go groupFields is\n%v", got, groupFields)
	}
	for _, c := range []struct {
		start  string
		fields []string
		n      int
	}{
		{"local P = {", positionFields, len((&positionArgs{}).add(nil))},
		{"local sp = {", spanFields, len((&spanArgs{}).add(nil))},
		{"local mk = {", markFields, len((&markArgs{}).add(nil))},
		{"local DD = {", dedupeFields, len((&dedupeArgs{}).add(nil))},
		{"local f = {", foldFields, len((&foldArgs{}).add(nil))},
	} {
		if got := readOrder(t, "apply.lua", c.start); !slices.Equal(got, c.fields) {
			t.Errorf("apply.lua reads %q as\n%v\ncontract.go has\n%v", c.start, got, c.fields)
		}
		if c.n != len(c.fields) {
			t.Errorf("the encoder of %q writes %d values, its field list has %d", c.start, c.n, len(c.fields))
		}
	}
	if got := readOrder(t, "rollover.lua", "local R = {"); !slices.Equal(got, rolloverFields) {
		t.Errorf("rollover.lua reads its head as\n%v\ncontract.go rolloverFields is\n%v", got, rolloverFields)
	}
	// The scripts beside apply.lua and rollover.lua: the table each reads
	// its ARGV (head) into, and how many values its encoder writes.
	for _, c := range []struct {
		script, start string
		fields        []string
		n             int
	}{
		{"dense.lua", "local D = {", denseFields, len((&denseArgs{}).add(nil))},
		{"gens.lua", "local G = {", gensFields, len((&gensArgs{}).add(nil))},
		{"marks.lua", "local m = {", lastMarkFields, len((&lastMarkArgs{}).add(nil))},
		{"positions.lua", "local H = {", raiseHeadFields, len((&raiseHeadArgs{}).add(nil))},
		{"positions.lua", "local r = {", raiseFields, len((&raiseArgs{}).add(nil))},
		{"register.lua", "local R = {", registerFields, len((&registerArgs{}).add(nil))},
		{"standings.lua", "local S = {", standingsFields, len((&standingsArgs{}).add(nil))},
		{"unlock.lua", "local U = {", unlockFields, len((&unlockArgs{}).add(nil))},
	} {
		if got := readOrder(t, c.script, c.start); !slices.Equal(got, c.fields) {
			t.Errorf("%s reads %q as\n%v\ncontract.go has\n%v", c.script, c.start, got, c.fields)
		}
		if c.n != len(c.fields) {
			t.Errorf("the encoder of %s writes %d values, its field list has %d", c.script, c.n, len(c.fields))
		}
	}
	if n := len((&denseArgs{values: []int64{1, 2}}).add(nil)); n != len(denseFields)+2 {
		t.Errorf("denseArgs.add writes %d values with 2 targets, want %d", n, len(denseFields)+2)
	}
	if n := len((&gensArgs{boards: []string{"a", "b"}}).add(nil)); n != len(gensFields)+2 {
		t.Errorf("gensArgs.add writes %d values with 2 boards, want %d", n, len(gensFields)+2)
	}
	for _, k := range [][]string{(&denseArgs{}).keys(), (&gensArgs{}).keys(), (&standingsArgs{}).keys(), (&unlockArgs{}).keys(), (&registerArgs{}).keys()} {
		if len(k) != 1 {
			t.Errorf("an encoder's keys() gives %d keys, its script reads 1", len(k))
		}
	}
	// Every script is covered: it reads its KEYS into the locals of
	// luaKeys, in order, and its ARGV by name through nx and nn (the
	// prelude's readers), never by index.
	files, _ := luaFS.ReadDir("lua")
	keysRead := regexp.MustCompile(`local (\w+) = KEYS\[(\d+)\]`)
	for _, f := range files {
		name := f.Name()
		if name == "prelude.lua" {
			continue
		}
		src, _ := luaFS.ReadFile("lua/" + name)
		var keys []string
		for i, m := range keysRead.FindAllStringSubmatch(string(src), -1) {
			if m[2] != strconv.Itoa(i+1) {
				t.Errorf("lua/%s reads KEYS[%s] as its key %d", name, m[2], i+1)
			}
			keys = append(keys, m[1])
		}
		if want, ok := luaKeys[name]; !slices.Equal(keys, want) || !ok && name != "apply.lua" {
			t.Errorf("lua/%s reads its KEYS as %v; contract.go luaKeys has %v", name, keys, want)
		}
		for i, line := range strings.Split(string(src), "\n") {
			if code, _, _ := strings.Cut(line, "--"); strings.Contains(code, "ARGV") {
				t.Errorf("lua/%s:%d reads ARGV by index instead of through its contract type: %s", name, i+1, strings.TrimSpace(line))
			}
		}
	}
	src, err := os.ReadFile("lua/apply.lua")
	if err != nil {
		t.Fatal(err)
	}
	head := regexp.MustCompile(`local (\w+), (\w+), (\w+), (\w+), (\w+) = A\[pos\], A\[pos \+ 1\] \+ 0, A\[pos \+ 2\], A\[pos \+ 3\], A\[pos \+ 4\]\n`)
	if ms := head.FindAllStringSubmatch(string(src), -1); len(ms) != 2 {
		t.Errorf("apply.lua reads an event head %d times as local <id>, <n>, <shard>, <fp>, <template> = A[pos], A[pos + 1] + 0, ..., want 2 (packed and per update)", len(ms))
	} else {
		for _, m := range ms {
			if got := m[1:]; !slices.Equal(got, eventFields) {
				t.Errorf("apply.lua reads an event head as\n%v\ncontract.go eventFields is\n%v", got, eventFields)
			}
		}
	}
	if m := regexp.MustCompile(`local (\w+), (\w+), (\w+), (\w+) = A\[pos\], A\[pos \+ 1\] \+ 0, A\[pos \+ 2\] \+ 0, A\[pos \+ 3\] \+ 0\n`).FindStringSubmatch(string(src)); m == nil {
		t.Errorf("apply.lua does not read a member's sum as local <member>, <d>, <ab>, <tq> = A[pos], A[pos + 1] + 0, ...")
	} else if got := m[1:]; !slices.Equal(got, sumFields) {
		t.Errorf("apply.lua reads a member's sum as\n%v\ncontract.go sumFields is\n%v", got, sumFields)
	}
	if m := regexp.MustCompile(`local (\w+), (\w+) = A\[pos\], A\[pos \+ 1\]\n`).FindStringSubmatch(string(src)); m == nil {
		t.Errorf("apply.lua does not read a plain event as local <shard>, <fp> = A[pos], A[pos + 1]")
	} else if got := m[1:]; !slices.Equal(got, plainEventFields) {
		t.Errorf("apply.lua reads a plain event as\n%v\ncontract.go plainEventFields is\n%v", got, plainEventFields)
	}
	if n := len((&eventArgs{}).addPlain(nil)); n != len(plainEventFields) {
		t.Errorf("eventArgs.addPlain writes %d values, plainEventFields has %d", n, len(plainEventFields))
	}
	if n := len((&sumArgs{}).add(nil)); n != len(sumFields) {
		t.Errorf("sumArgs.add writes %d values, sumFields has %d", n, len(sumFields))
	}
	if n := len((&eventArgs{}).add(nil)); n != len(eventFields) {
		t.Errorf("eventArgs.add writes %d values, eventFields has %d", n, len(eventFields))
	}
	if n := len((&groupArgs{}).add(nil)); n != len(groupFields) {
		t.Errorf("groupArgs.add writes %d values, groupFields has %d", n, len(groupFields))
	}
	if n := len((&updateArgs{}).add(nil)); n != len(updateFields) {
		t.Errorf("updateArgs.add writes %d values, updateFields has %d", n, len(updateFields))
	}
	if n := len((&rolloverArgs{mids: []string{"a", "b"}}).add(nil)); n != len(rolloverFields)+2 {
		t.Errorf("rolloverArgs.add writes %d values with 2 mids, want %d", n, len(rolloverFields)+2)
	}
	bare := regexp.MustCompile(`\b(window|agg|mode)\s*[=~]=\s*\d|A\[q \+ \d\]`)
	status := regexp.MustCompile(`'[0-5]'`) // apply.lua's verdicts are ST_* constants
	for _, f := range files {
		src, _ := luaFS.ReadFile("lua/" + f.Name())
		for i, line := range strings.Split(string(src), "\n") {
			if code, _, _ := strings.Cut(line, "--"); bare.MatchString(code) || f.Name() == "apply.lua" && status.MatchString(code) {
				t.Errorf("lua/%s:%d compares against a bare number instead of a contract constant: %s", f.Name(), i+1, strings.TrimSpace(line))
			}
		}
	}
	// Key layout, meta and gens fields, gens ops and shared numbers come
	// from the prelude, never from literals in a script.
	var named []string
	for _, c := range luaConsts {
		if v, ok := c.value.(string); ok && len(v) > 1 {
			named = append(named, "'"+v+"'")
		}
	}
	named = append(named, "'t:all'", "'p:'", "'r:'", "4503599627370496", "= 4000", "< 1000")
	for _, f := range files {
		src, _ := luaFS.ReadFile("lua/" + f.Name())
		for i, line := range strings.Split(string(src), "\n") {
			code, _, _ := strings.Cut(line, "--")
			for _, lit := range named {
				if strings.Contains(code, lit) {
					t.Errorf("lua/%s:%d writes %s instead of its contract constant: %s", f.Name(), i+1, lit, strings.TrimSpace(line))
				}
			}
		}
	}
	for _, w := range ranking.Windows() {
		luaWindowOf(w) // panics without a mapping
	}
	for _, a := range ranking.Aggregates() {
		luaAggOf(a)
	}
	p := luaPrelude()
	for _, c := range luaConsts {
		if !strings.Contains(p, "local "+c.name+" = ") {
			t.Errorf("the prelude lacks %s", c.name)
		}
	}
}
