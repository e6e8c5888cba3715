package bench

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// meter is a reading of the CPU times of Redis, this process and the
// broker.
type meter struct {
	at                   time.Time
	redis, self, broker  time.Duration
	haveSelf, haveBroker bool
	steal                stealReading
	redisWait            time.Duration // Redis' main thread, runnable, waiting for a CPU (pidWait)
	haveWait             bool
	// minor page faults of this process and of Redis (selfUsage, pidFaults)
	selfFaults, redisFaults int64
	haveRedisFaults         bool
}

func (e *env) meter(ctx context.Context) (meter, error) {
	m := meter{at: time.Now()}
	info, err := e.admin.Info(ctx, "cpu").Result()
	if err != nil {
		return m, fmt.Errorf("INFO cpu: %w", err)
	}
	var sum float64
	for _, k := range []string{"used_cpu_sys", "used_cpu_user"} {
		f, err := strconv.ParseFloat(infoField(info, k), 64)
		if err != nil {
			return m, fmt.Errorf("INFO cpu: %s: %w", k, err)
		}
		sum += f
	}
	m.redis = time.Duration(sum * float64(time.Second))
	m.self, m.selfFaults, m.haveSelf = selfUsage()
	m.broker, m.haveBroker = pidCPU(e.brokerPID)
	m.steal = readSteal()
	m.redisWait, _, m.haveWait = pidWait(e.redisPID)
	m.redisFaults, m.haveRedisFaults = pidFaults(e.redisPID)
	return m, nil
}

// cpu returns the CPU figures between two readings for events and
// updates, over wall time elapsed.
func cpu(before, after meter, events, updates int64, elapsed time.Duration) CPU {
	redis := after.redis - before.redis
	c := CPU{
		RedisBusy:        round(redis.Seconds()/elapsed.Seconds(), 3),
		RedisUsPerEvent:  perUs(redis, events),
		RedisUsPerUpdate: perUs(redis, updates),
	}
	if before.haveSelf && after.haveSelf {
		v, f := perUs(after.self-before.self, events), after.selfFaults-before.selfFaults
		c.ProcessUsPerEvent, c.ProcessFaults = &v, &f
	}
	if before.haveBroker && after.haveBroker {
		v := perUs(after.broker-before.broker, events)
		c.BrokerUsPerEvent = &v
	}
	if v := before.steal.stealPctTo(after.steal); v >= 0 {
		c.StealPct = &v
	}
	if before.haveRedisFaults && after.haveRedisFaults {
		v := after.redisFaults - before.redisFaults
		c.RedisFaults = &v
	}
	if before.haveWait && after.haveWait && elapsed > 0 {
		v := round(100*(after.redisWait-before.redisWait).Seconds()/elapsed.Seconds(), 1)
		c.RedisWaitPct = &v
	}
	return c
}

// perUs is d per n in microseconds, rounded to 2 decimals.
func perUs(d time.Duration, n int64) float64 {
	if n == 0 {
		return 0
	}
	return round(float64(d.Nanoseconds())/1e3/float64(n), 2)
}

// infoField returns the value of key in an INFO reply.
func infoField(info, key string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), key+":"); ok {
			return v
		}
	}
	return ""
}

// notCounted are the commands of the benchmark itself and of the clients'
// handshakes, left out of the statistics.
var notCounted = map[string]bool{
	"info": true, "config|resetstat": true, "config|set": true, "config|get": true, "ping": true,
	"script|load": true, "flushall": true, "hello": true, "client|setinfo": true, "client|setname": true,
	"slowlog|get": true, "slowlog|reset": true, "memory|usage": true, "scan": true, "dbsize": true,
}

// isScript reports whether a command runs a script.
func isScript(name string) bool {
	switch name {
	case "evalsha", "eval", "evalsha_ro", "eval_ro", "fcall", "fcall_ro":
		return true
	}
	return false
}

// commandStats reads INFO commandstats (since the last CONFIG RESETSTAT)
// and splits the Redis CPU of events between scripts, the commands they
// call, and the rest. Redis counts a command called by a script both on
// its own line and within the script's time; commands the clients send
// directly are counted as called by scripts too except SADD (rankd's dims
// registry); the stream-time marks rankd writes outside its script (a few
// per batch) are counted as script commands: a small overestimate.
func (e *env) commandStats(ctx context.Context, events int64, redisCPU time.Duration) (Commands, error) {
	info, err := e.admin.Info(ctx, "commandstats").Result()
	if err != nil {
		return Commands{}, fmt.Errorf("INFO commandstats: %w", err)
	}
	var out Commands
	var scripts, inner int64
	for line := range strings.SplitSeq(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, isCmd := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isCmd || notCounted[name] {
			continue
		}
		st := CommandStat{Command: name}
		for kv := range strings.SplitSeq(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "calls":
				st.Calls, _ = strconv.ParseInt(v, 10, 64)
			case "usec":
				st.Usec, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		if st.Calls == 0 {
			continue
		}
		st.UsecPerCall = round(float64(st.Usec)/float64(st.Calls), 2)
		st.CallsPerEvent = round(float64(st.Calls)/float64(events), 3)
		st.UsPerEvent = round(float64(st.Usec)/float64(events), 2)
		switch {
		case isScript(name):
			scripts += st.Usec
		case name == "sadd":
		default:
			inner += st.Usec
		}
		out.Stats = append(out.Stats, st)
	}
	sort.Slice(out.Stats, func(i, j int) bool { return out.Stats[i].Usec > out.Stats[j].Usec })
	per := func(us int64) float64 { return round(float64(us)/float64(events), 2) }
	out.ScriptsUsPerEvent = per(scripts)
	if scripts > 0 {
		out.InScriptsUsPerEvent = per(inner)
		out.LuaUsPerEvent = per(scripts - inner)
	}
	var all int64
	for _, st := range out.Stats {
		if !isScript(st.Command) && scripts > 0 && st.Command != "sadd" {
			continue // inside scripts: counted in the scripts' time
		}
		all += st.Usec
	}
	out.OutsideUsPerEvent = per(redisCPU.Microseconds() - all)
	logs, err := e.admin.SlowLogGet(ctx, -1).Result()
	if err != nil {
		return Commands{}, fmt.Errorf("SLOWLOG GET: %w", err)
	}
	var longest time.Duration
	for _, l := range logs {
		if len(l.Args) == 0 || !isScript(strings.ToLower(fmt.Sprint(l.Args[0]))) {
			continue
		}
		longest = max(longest, l.Duration)
		if l.Duration > 5*time.Millisecond {
			out.ScriptsOver5ms++
		}
	}
	out.LongestScriptMs = ms(longest)
	return out, nil
}

// round rounds f to n decimals.
func round(f float64, n int) float64 {
	p := 1.0
	for range n {
		p *= 10
	}
	if f < 0 {
		return -float64(int64(-f*p+0.5)) / p
	}
	return float64(int64(f*p+0.5)) / p
}

// stealReading is the machine's CPU time at one moment (readSteal): the
// time a hypervisor took from this virtual machine's CPUs (steal) and all
// of it (user to steal), in ticks; ok false: unknown.
type stealReading struct {
	steal, total int64
	ok           bool
}

// stealPct returns the share of the machine's CPU time stolen from r to
// now, in percent; -1 when unknown.
func (r stealReading) stealPct() float64 { return r.stealPctTo(readSteal()) }

// stealPctTo is stealPct from r to a later reading.
func (r stealReading) stealPctTo(now stealReading) float64 {
	if !r.ok || !now.ok || now.total <= r.total {
		return -1
	}
	return round(100*float64(now.steal-r.steal)/float64(now.total-r.total), 1)
}

// cpuProfile starts a CPU profile into path (none when path is "") and
// returns what stops it and closes the file; a second call does nothing.
func cpuProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			pprof.StopCPUProfile()
			_ = f.Close()
		})
	}, nil
}
