package chaos

import (
	"fmt"
	"slices"
	"time"
)

// The crash loop: one instance is SIGKILLed, restarted 0-0.3 s later (its
// join starts a rebalance) and killed again 1-2 s after the previous kill,
// mostly while the group rebalances; after the last kill it stays down.
// Kafka's coordinator bounds the recovery: the killed member expires by
// its session timeout even while a rebalance runs, and a rebalance ends at
// its rebalance timeout. So from the last kill every partition must commit
// a message produced after it within rebalance timeout + session timeout +
// crashLoopSlack. Then the instance starts again, and the run goes on to
// the drain and the exact comparison of every board.

// partSpread describes, over the partitions, when each recovered from the
// injection (first, median, last) and its longest stall (the time its
// committed offset stood still while messages waited) until every
// partition recovered: shortest, median, longest, and how many stalled
// over 2 s.
func partSpread(w *recoveryWatch, injected time.Time) string {
	var ds, stalls []time.Duration
	for _, at := range w.parts {
		ds = append(ds, at.Sub(injected))
	}
	for _, d := range w.stall {
		stalls = append(stalls, d)
	}
	if len(ds) == 0 || len(stalls) == 0 {
		return "no partition"
	}
	slices.Sort(ds)
	slices.Sort(stalls)
	slow := 0
	for _, d := range stalls {
		if d > 2*time.Second {
			slow++
		}
	}
	return fmt.Sprintf("partitions recovered: first %.2fs, median %.2fs, last %.2fs; longest stall per partition: shortest %.2fs, median %.2fs, longest %.2fs, %d of %d over 2s",
		ds[0].Seconds(), ds[len(ds)/2].Seconds(), ds[len(ds)-1].Seconds(),
		stalls[0].Seconds(), stalls[len(stalls)/2].Seconds(), stalls[len(stalls)-1].Seconds(), slow, len(stalls))
}

// crashLoop runs the crash loop with kills SIGKILLs and checks the
// recovery from the last one against bound.
func (c *chaos) crashLoop(kills int, bound time.Duration) fault {
	t := c.t
	in := c.instances[c.rng.IntN(len(c.instances))]
	var before offsetSnap
	var injected time.Time
	for i := range kills {
		if i > 0 {
			time.Sleep(time.Duration(c.rng.IntN(300)) * time.Millisecond)
			if err := in.start(); err != nil {
				t.Fatal(err)
			}
			c.down = nil
			time.Sleep(time.Until(injected.Add(time.Duration(1000+c.rng.IntN(1000)) * time.Millisecond)))
		}
		c.checkAlive()
		if i == kills-1 {
			before = c.snapshot()
		}
		injected = time.Now()
		c.down = in
		in.kill()
		t.Logf("crash loop: SIGKILL %d/%d of %s at %.1fs (run %d)", i+1, kills, in.name, injected.Sub(c.start).Seconds(), in.runs)
	}
	watch := c.watchRecovery(before, injected, "crash loop")
	at, err := watch.wait(c)
	if err != nil {
		c.failWithLogs("%v", err)
	}
	f := fault{kind: faultCrashLoop, target: in.name, at: injected.Sub(c.start), recovery: at.Sub(injected)}
	t.Logf("crash loop: every partition committed again %.2fs after the last SIGKILL (bound %v = rebalance timeout + session timeout + %v slack); %s",
		f.recovery.Seconds(), bound, crashLoopSlack, partSpread(watch, injected))
	if f.recovery > bound {
		c.t.Errorf("crash loop: recovered %.2fs after the last SIGKILL, beyond %v", f.recovery.Seconds(), bound)
	}
	// The instance comes back; its join is one more rebalance.
	before = c.snapshot()
	restarted := time.Now()
	if err := in.start(); err != nil {
		t.Fatal(err)
	}
	c.down = nil
	f.outage = restarted.Sub(injected)
	f.afterFix = at.Sub(restarted)
	watch = c.watchRecovery(before, restarted, "restart after the crash loop")
	at, err = watch.wait(c)
	if err != nil {
		c.failWithLogs("%v", err)
	}
	t.Logf("crash loop: %s started again; every partition committed again %.2fs after the start; %s",
		in.name, at.Sub(restarted).Seconds(), partSpread(watch, restarted))
	return f
}

// measureRecovery injects one of each instance fault, one at a time, and
// logs the recovery of each (for docs/recovery.md):
//
//	kill      SIGKILL; the instance stays down until every partition
//	          recovered, then starts again (measured too: its join)
//	term      SIGTERM, the same
//	restart   SIGKILL and a start 2 s later, within the session timeout
//	crashloop the crash loop, 5 SIGKILLs
func (c *chaos) measureRecovery() {
	t := c.t
	settle := func() { time.Sleep(3 * time.Second) }
	measure := func(what string, before offsetSnap, since time.Time, w *recoveryWatch) time.Duration {
		if w == nil {
			// Watched 15 s at least: the stalls of a start come after
			// the instance joins.
			w = c.watchRecoveryFor(before, since, what, 15*time.Second)
		}
		at, err := w.wait(c)
		if err != nil {
			c.failWithLogs("%v", err)
		}
		d := at.Sub(since)
		t.Logf("MEASURED %-28s every partition committed again %6.2fs after it; %s", what+":", d.Seconds(), partSpread(w, since))
		return d
	}
	pick := func() *instance { return c.instances[c.rng.IntN(len(c.instances))] }

	for _, kind := range []faultKind{faultKill, faultTerm} {
		settle()
		in := pick()
		before := c.snapshot()
		injected := time.Now()
		what := "SIGKILL of " + in.name
		c.down = in
		if kind == faultKill {
			in.kill()
		} else {
			what = "SIGTERM of " + in.name
			if code, err := in.term(30 * time.Second); err != nil || code != 0 {
				c.failWithLogs("%s: exit %d after SIGTERM (%v), want 0", in.name, code, err)
			}
		}
		d := measure(what, before, injected, nil)
		c.faults = append(c.faults, fault{kind: kind, target: in.name, at: injected.Sub(c.start), recovery: d, outage: d})
		settle()
		before = c.snapshot()
		started := time.Now()
		if err := in.start(); err != nil {
			t.Fatal(err)
		}
		c.down = nil
		measure("start of "+in.name, before, started, nil)
	}

	settle()
	in := pick()
	before := c.snapshot()
	injected := time.Now()
	w := c.watchRecoveryFor(before, injected, "SIGKILL + start 2s later", 15*time.Second)
	c.down = in
	in.kill()
	time.Sleep(2 * time.Second)
	if err := in.start(); err != nil {
		t.Fatal(err)
	}
	c.down = nil
	restarted := time.Now()
	d := measure("SIGKILL + start 2s later", before, injected, w)
	c.faults = append(c.faults, fault{kind: faultKill, target: in.name, at: injected.Sub(c.start), recovery: d,
		outage: restarted.Sub(injected), afterFix: d - restarted.Sub(injected), note: "(restart within the session timeout)"})

	settle()
	f := c.crashLoop(5, 10*time.Second+10*time.Second+crashLoopSlack)
	t.Logf("MEASURED %-28s every partition committed again %6.2fs after the last SIGKILL", "crash loop (5 SIGKILLs):", f.recovery.Seconds())
	c.faults = append(c.faults, f)
}
