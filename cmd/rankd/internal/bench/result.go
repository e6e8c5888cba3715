package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Result is what Run measured; its JSON is what --json writes. Phases that
// were skipped are absent (null).
type Result struct {
	Started  string    `json:"started"`
	Seconds  float64   `json:"seconds"`
	Machine  Machine   `json:"machine"`
	Settings Settings  `json:"settings"`
	Preload  Preload   `json:"preload"`
	Drain    Drains    `json:"drain"`
	Memory   *Memory   `json:"memory"`
	Replay   *Replay   `json:"replay"`
	Latency  *Latency  `json:"latency"`
	Rollover *Rollover `json:"rollover"`
	Cost     *Cost     `json:"cost,omitempty"`
	Reads    *Reads    `json:"reads,omitempty"`
}

// Machine describes where the benchmark ran.
type Machine struct {
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	Go         string `json:"go"`
	OS         string `json:"os"`
	LoadAvg    string `json:"loadavg,omitempty"` // at the start
	// StealPct is the share of the machine's CPU time a hypervisor took
	// from it over the run (/proc/stat; -1: unknown).
	StealPct     float64 `json:"steal_pct"`
	Broker       string  `json:"broker"`
	Redis        string  `json:"redis"`
	RedisVersion string  `json:"redis_version"`
}

// Settings are the options of the run.
type Settings struct {
	Events      int   `json:"events"`
	NaiveEvents int   `json:"naive_events"`
	Seed        int64 `json:"seed"`
	Partitions  int   `json:"partitions"`
	// TopicPartitions: the topics given their own partition count.
	TopicPartitions map[string]int `json:"topic_partitions,omitempty"`
	Workers         int            `json:"workers"`
	Batch           int            `json:"batch"`
	Linger          string         `json:"linger"`
	RedisNice       int            `json:"redis_nice,omitempty"`
	RolloverMembers int            `json:"rollover_members"`
	LatencyDuration string         `json:"latency_duration"`
	Skipped         []string       `json:"skipped,omitempty"`
}

// Preload is the writing of the events to the broker.
type Preload struct {
	Events       int     `json:"events"`
	Seconds      float64 `json:"seconds"`
	EventsPerSec float64 `json:"events_per_sec"`
	From         string  `json:"event_times_from"`
	Span         string  `json:"event_times_span"`
	// Partitions of each topic, as the broker reported them.
	Partitions map[string]int `json:"partitions"`
}

// Drains are the three drains of the preloaded events and their ratios.
type Drains struct {
	Rankd *Drain `json:"rankd"`
	Naive *Drain `json:"naive"`
	Seed  *Drain `json:"seed_pipelined"`
	// RankdOverNaive and RankdOverSeed are ratios of events/s.
	RankdOverNaive float64 `json:"rankd_over_naive,omitempty"`
	RankdOverSeed  float64 `json:"rankd_over_seed,omitempty"`
}

func (d *Drains) ratios() {
	if d.Rankd == nil {
		return
	}
	if d.Naive != nil && d.Naive.EventsPerSec > 0 {
		d.RankdOverNaive = round(d.Rankd.EventsPerSec/d.Naive.EventsPerSec, 2)
	}
	if d.Seed != nil && d.Seed.EventsPerSec > 0 {
		d.RankdOverSeed = round(d.Rankd.EventsPerSec/d.Seed.EventsPerSec, 2)
	}
}

// Drain is one consumer draining events into an emptied Redis.
type Drain struct {
	Events       int64   `json:"events"`
	Updates      int64   `json:"updates"`
	Seconds      float64 `json:"seconds"`
	EventsPerSec float64 `json:"events_per_sec"`
	CPU
	Commands Commands `json:"redis_commands"`
	Notes    []string `json:"notes,omitempty"`
}

// CPU is the CPU spent per event (µs, = ms per 1k events) while a phase
// ran.
type CPU struct {
	// RedisBusy is Redis CPU / wall time (Redis runs commands on one
	// thread).
	RedisBusy        float64 `json:"redis_busy"`
	RedisUsPerEvent  float64 `json:"redis_cpu_us_per_event"`
	RedisUsPerUpdate float64 `json:"redis_cpu_us_per_update"`
	// ProcessUsPerEvent is the CPU of this process (getrusage): the
	// consumer, plus the benchmark's lag polling. Absent outside Linux.
	ProcessUsPerEvent *float64 `json:"process_cpu_us_per_event,omitempty"`
	// BrokerUsPerEvent is the broker child's CPU (/proc); absent with
	// --brokers.
	BrokerUsPerEvent *float64 `json:"broker_cpu_us_per_event,omitempty"`
	// StealPct is the share of the machine's CPU time the hypervisor took
	// during the phase (/proc/stat), in percent: a phase that lost some
	// ran slower than the code does. Absent outside Linux.
	StealPct *float64 `json:"steal_pct,omitempty"`
	// RedisWaitPct is how long Redis' main thread, runnable, waited for a
	// CPU during the phase (/proc/<pid>/schedstat), in percent of the
	// phase's wall time: Redis not busy for want of a CPU, not of work.
	// Absent with --redis or outside Linux.
	RedisWaitPct *float64 `json:"redis_wait_pct,omitempty"`
	// ProcessFaults and RedisFaults are the minor page faults of this
	// process and of Redis during the phase: pages of memory touched for
	// the first time (getrusage, /proc/<pid>/stat). On some VMs each costs
	// microseconds (docs/benchmarks.md, "Fresh memory"). Absent outside
	// Linux, and RedisFaults with --redis.
	ProcessFaults *int64 `json:"process_page_faults,omitempty"`
	RedisFaults   *int64 `json:"redis_page_faults,omitempty"`
}

// Commands is where Redis spent its time, per event, from INFO
// commandstats.
type Commands struct {
	// ScriptsUsPerEvent is the time of the script calls (EVALSHA, EVAL),
	// the commands they call included.
	ScriptsUsPerEvent float64 `json:"scripts_us_per_event"`
	// InScriptsUsPerEvent is the time of the commands called by scripts.
	InScriptsUsPerEvent float64 `json:"commands_in_scripts_us_per_event"`
	// LuaUsPerEvent is scripts minus the commands they call: argument
	// handling, the Lua code, the redis.call overhead.
	LuaUsPerEvent float64 `json:"lua_us_per_event"`
	// OutsideUsPerEvent is the Redis CPU outside any command: network,
	// protocol parsing, the event loop.
	OutsideUsPerEvent float64 `json:"outside_commands_us_per_event"`
	// LongestScriptMs is the longest script call Redis ran (SLOWLOG),
	// the longest a command of another client waited behind one call;
	// ScriptsOver5ms counts the script calls longer than 5 ms.
	LongestScriptMs float64 `json:"longest_script_ms"`
	ScriptsOver5ms  int     `json:"scripts_over_5ms"`
	// Stats are the commands called, most time first.
	Stats []CommandStat `json:"stats"`
}

// CommandStat is one line of INFO commandstats.
type CommandStat struct {
	Command       string  `json:"command"`
	Calls         int64   `json:"calls"`
	Usec          int64   `json:"usec"`
	UsecPerCall   float64 `json:"usec_per_call"`
	CallsPerEvent float64 `json:"calls_per_event"`
	UsPerEvent    float64 `json:"us_per_event"`
}

// Memory is Redis' memory after the rankd drain.
type Memory struct {
	UsedMemory int64 `json:"used_memory"` // INFO memory
	// UsedMemoryEmpty is used_memory of the emptied Redis before the drain.
	UsedMemoryEmpty int64 `json:"used_memory_empty"`
	BoardKeys       int64 `json:"board_keys"`    // sorted sets
	BoardMembers    int64 `json:"board_members"` // sum of their ZCARD
	BoardBytes      int64 `json:"board_bytes"`   // sum of their MEMORY USAGE
	// BytesPerBoardMember is BoardBytes / BoardMembers.
	BytesPerBoardMember float64 `json:"bytes_per_board_member"`
	OtherKeys           int64   `json:"other_keys"`  // hashes, sets, strings of the boards
	OtherBytes          int64   `json:"other_bytes"` // their MEMORY USAGE
	// Dedupe: the message IDs held (fingerprints in sets: the sum of their
	// SCARD) and the keys holding them (sets, verdict hashes, the meta
	// hash), with their MEMORY USAGE.
	DedupeIDs   int64 `json:"dedupe_ids"`
	DedupeKeys  int64 `json:"dedupe_keys"`
	DedupeBytes int64 `json:"dedupe_bytes"`
	// BytesPerDedupeID is DedupeBytes / DedupeIDs.
	BytesPerDedupeID float64 `json:"bytes_per_dedupe_id"`
	// BytesPerDedupeIDAll is (used_memory - used_memory_empty - board
	// and other bytes) / dedupe IDs: what MEMORY USAGE leaves out
	// (allocator overhead, the keyspace's dict) included.
	BytesPerDedupeIDAll float64 `json:"bytes_per_dedupe_id_all"`
	// Per event: (used_memory - used_memory_empty) / events.
	BytesPerEvent float64 `json:"bytes_per_event"`
}

// Replay is the rebuild of every board from the log into a new generation.
type Replay struct {
	Events       int64   `json:"events"`
	Seconds      float64 `json:"seconds"` // of consumer.Replay: reading and applying
	EventsPerSec float64 `json:"events_per_sec"`
	// Decided is the events whose duplicates the replay decided in memory
	// (below the rankd group's committed offsets: all of them here).
	Decided int64 `json:"decided"`
	// TotalSeconds is the whole replay: plan, replay, rollover, switch and
	// the deletion of the old generation.
	TotalSeconds float64 `json:"total_seconds"`
	CPU
	Commands Commands `json:"redis_commands"`
}

// Latency is the event-to-visible latency at a fixed produce rate.
type Latency struct {
	Rate         float64 `json:"rate"`          // asked, events/s
	ProducedRate float64 `json:"produced_rate"` // achieved
	Seconds      float64 `json:"seconds"`
	Events       int64   `json:"events"`
	Markers      int     `json:"markers"`
	// LagAtEnd is how many events rankd had not committed when the
	// producer stopped (-1: unknown): a backlog means the rate was not
	// sustained and latencies grew with it.
	LagAtEnd int64 `json:"lag_at_end"`
	// ProduceP50Ms is the median duration of the WriteMessages calls that
	// carried markers (part of the latency).
	ProduceP50Ms float64 `json:"produce_p50_ms"`
	// Redis: visible to a ZSCORE of the board's sorted set; API: to GET
	// /v1/boards/{board}/members/{member}.
	Redis Visible `json:"redis"`
	API   Visible `json:"api"`
	// CacheTTL is rankd's api.cache_ttl during the phase: a read of the
	// API sees the board at most that much (plus one read) late.
	CacheTTL string `json:"cache_ttl"`
	// CacheRefresh is rankd's api.cache_refresh: a page of a board that
	// changed is read again once it is that old (0s: at the TTL).
	CacheRefresh string `json:"cache_refresh"`
	// TrafficCPU is the CPU (cores) of the child process that produces
	// and polls, apart from rankd (traffic.go).
	TrafficCPU float64 `json:"traffic_cpu"`
	// Batches is how many batches rankd applied during the phase, of
	// BatchMessages messages on average, each applied (decoded, routed and
	// written: Sink.Apply) in BatchApplyMs on average.
	Batches       int64   `json:"batches"`
	BatchMessages float64 `json:"batch_messages"`
	BatchApplyMs  float64 `json:"batch_apply_ms"`
	CPU
	Commands Commands `json:"redis_commands"`
}

// Visible is the latency of the markers as one poller saw them.
type Visible struct {
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
	// PollMs is the mean time between two reads (the resolution, with
	// the read's duration).
	PollMs float64 `json:"poll_ms"`
	// ReadP50Ms and ReadP99Ms are the durations of one read.
	ReadP50Ms float64 `json:"read_p50_ms"`
	ReadP99Ms float64 `json:"read_p99_ms"`
}

// Rollover is the prefill of a big rolling board.
type Rollover struct {
	Members       int     `json:"members"`
	Seconds       float64 `json:"seconds"`
	MembersPerSec float64 `json:"members_per_sec"`
	// The concurrent reader: ZREVRANGE of the top 10 in a loop.
	ReaderCalls int     `json:"reader_calls"`
	ReaderP50Ms float64 `json:"reader_p50_ms"`
	ReaderP99Ms float64 `json:"reader_p99_ms"`
	ReaderMaxMs float64 `json:"reader_max_ms"`
	// ReaderOver5ms counts reader calls that took over 5 ms.
	ReaderOver5ms int `json:"reader_over_5ms"`
	// SlowestCallMs is the longest command Redis ran (SLOWLOG).
	SlowestCallMs float64 `json:"slowest_call_ms"`
	SlowestCall   string  `json:"slowest_call"`
	// StealPct is the share of the machine's CPU time a hypervisor took
	// from it during the rollover (/proc/stat; -1: unknown): a virtual
	// CPU taken away stalls whatever runs on it, a Redis call included.
	StealPct float64 `json:"steal_pct"`
	// RedisWaitMs is how long Redis' main thread, runnable, waited for a
	// CPU during the rollover, in all (the scheduler's run-queue time),
	// and RedisPreempted how often another thread took its CPU (-1: not
	// measured: not Linux, or a Redis of --redis). On a machine with
	// fewer CPUs than busy threads, a read waits that long on top of the
	// calls ahead of it.
	RedisWaitMs    float64 `json:"redis_wait_ms"`
	RedisPreempted int64   `json:"redis_preempted"`
}

// waited describes RedisWaitMs and RedisPreempted for the report ("" when
// not measured).
func (o *Rollover) waited() string {
	if o.RedisWaitMs < 0 {
		return ""
	}
	return fmt.Sprintf("; Redis waited %.1f ms for a CPU, preempted %d times", o.RedisWaitMs, o.RedisPreempted)
}

// WriteJSON writes r, indented, to file.
func (r *Result) WriteJSON(file string) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(file, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing the results: %w", err)
	}
	return nil
}

// WriteTable writes the table of r.
func (r *Result) WriteTable(w io.Writer) {
	m, s := r.Machine, r.Settings
	fmt.Fprintf(w, "rankd bench: %d events (seed %d), %d CPUs (GOMAXPROCS %d), %s, Redis %s; broker: %s; redis: %s; load at start %s; CPU steal over the run %s\n",
		s.Events, s.Seed, m.CPUs, m.GOMAXPROCS, m.Go, m.RedisVersion, m.Broker, m.Redis, m.LoadAvg, pct(m.StealPct))
	var parts []string
	for _, t := range slices.Sorted(maps.Keys(r.Preload.Partitions)) {
		parts = append(parts, fmt.Sprintf("%s %d", t, r.Preload.Partitions[t]))
	}
	nice := ""
	if s.RedisNice != 0 {
		nice = fmt.Sprintf("; redis-server at nice %d", s.RedisNice)
	}
	fmt.Fprintf(w, "preload: %d events in %.2fs (%.0f/s); rankd: %d workers, batches of %d, linger %s%s; partitions: %s\n\n",
		r.Preload.Events, r.Preload.Seconds, r.Preload.EventsPerSec, s.Workers, s.Batch, s.Linger, nice, strings.Join(parts, ", "))

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "drain\tevents\tupdates\tseconds\tevents/s\tvs rankd\tRedis busy\tRedis µs/event\tRedis µs/update\trankd µs/event\tbroker µs/event\tCPU steal\tRedis waited\t")
	row := func(name string, d *Drain) {
		if d == nil {
			return
		}
		ratio := "1.00x"
		if r.Drain.Rankd == nil {
			ratio = "-"
		} else if d != r.Drain.Rankd {
			ratio = fmt.Sprintf("%.2fx", d.EventsPerSec/r.Drain.Rankd.EventsPerSec)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.2f\t%.0f\t%s\t%.0f%%\t%.2f\t%.2f\t%s\t%s\t%s\t%s\t\n", name, d.Events, d.Updates, d.Seconds,
			d.EventsPerSec, ratio, 100*d.RedisBusy, d.RedisUsPerEvent, d.RedisUsPerUpdate, opt(d.ProcessUsPerEvent), opt(d.BrokerUsPerEvent), optPct(d.StealPct), optPct(d.RedisWaitPct))
	}
	row("rankd", r.Drain.Rankd)
	row("naive", r.Drain.Naive)
	row("seed pipelined", r.Drain.Seed)
	if p := r.Replay; p != nil {
		fmt.Fprintf(tw, "replay\t%d\t\t%.2f\t%.0f\t\t%.0f%%\t%.2f\t%.2f\t%s\t%s\t%s\t%s\t\n", p.Events, p.Seconds, p.EventsPerSec,
			100*p.RedisBusy, p.RedisUsPerEvent, p.RedisUsPerUpdate, opt(p.ProcessUsPerEvent), opt(p.BrokerUsPerEvent), optPct(p.StealPct), optPct(p.RedisWaitPct))
	}
	_ = tw.Flush()
	var faults []string
	for _, f := range []struct {
		name string
		c    *CPU
	}{{"rankd drain", cpuOf(r.Drain.Rankd)}, {"naive", cpuOf(r.Drain.Naive)}, {"seed pipelined", cpuOf(r.Drain.Seed)}, {"replay", replayCPU(r.Replay)}} {
		if f.c != nil && f.c.ProcessFaults != nil {
			faults = append(faults, fmt.Sprintf("%s %d / %s", f.name, *f.c.ProcessFaults, optInt(f.c.RedisFaults)))
		}
	}
	if len(faults) > 0 {
		fmt.Fprintf(w, "page faults (memory pages touched for the first time), this process / Redis: %s\n", strings.Join(faults, ", "))
	}
	if r.Drain.RankdOverNaive > 0 || r.Drain.RankdOverSeed > 0 {
		fmt.Fprintf(w, "rankd drains %.1fx as fast as the naive consumer and %.2fx as fast as the seed script pipelined\n",
			r.Drain.RankdOverNaive, r.Drain.RankdOverSeed)
	}
	var lat *Commands
	if r.Latency != nil {
		lat = &r.Latency.Commands
	}
	for _, d := range []struct {
		name string
		c    *Commands
	}{{"rankd", cmds(r.Drain.Rankd)}, {"naive", cmds(r.Drain.Naive)}, {"seed", cmds(r.Drain.Seed)}, {"latency phase", lat}} {
		if d.c == nil {
			continue
		}
		fmt.Fprintf(w, "%s Redis µs/event: scripts %.2f (commands in them %.2f + Lua and call overhead %.2f; longest call %.2f ms, %d over 5 ms), outside commands %.2f; by command (calls/event, µs/call):",
			d.name, d.c.ScriptsUsPerEvent, d.c.InScriptsUsPerEvent, d.c.LuaUsPerEvent, d.c.LongestScriptMs, d.c.ScriptsOver5ms, d.c.OutsideUsPerEvent)
		for i, st := range d.c.Stats {
			if i == 8 {
				break
			}
			fmt.Fprintf(w, " %s %.2f (%.3f, %.2f)", st.Command, st.UsPerEvent, st.CallsPerEvent, st.UsecPerCall)
		}
		fmt.Fprintln(w)
	}
	if l := r.Latency; l != nil {
		fmt.Fprintf(w, "latency: event to visible at %.0f events/s for %.0fs (%d markers; produce call p50 %.1f ms; Redis busy %.0f%%, %.2f µs per event; %d batches of %.0f messages, applied in %.1f ms on average; %d events not committed when the producer stopped; CPU steal %s; Redis waited for a CPU %s of the time):\n",
			l.ProducedRate, l.Seconds, l.Markers, l.ProduceP50Ms, 100*l.RedisBusy, l.RedisUsPerEvent, l.Batches, l.BatchMessages, l.BatchApplyMs, l.LagAtEnd, optPct(l.StealPct), optPct(l.RedisWaitPct))
		for _, v := range []struct {
			name string
			v    Visible
		}{{"in Redis (ZSCORE)", l.Redis}, {"in the HTTP API (GET member, cache TTL " + l.CacheTTL + ", refresh " + l.CacheRefresh + ")", l.API}} {
			fmt.Fprintf(w, "  %-44s p50 %.1f ms, p99 %.1f ms, max %.1f ms (a read every %.2f ms; one read p50 %.2f ms, p99 %.2f ms)\n",
				v.name, v.v.P50Ms, v.v.P99Ms, v.v.MaxMs, v.v.PollMs, v.v.ReadP50Ms, v.v.ReadP99Ms)
		}
	}
	if o := r.Rollover; o != nil {
		fmt.Fprintf(w, "rollover: %d-member rolling board in %.2fs (%.0f members/s); concurrent ZREVRANGE top-10 reader: %d calls, p50 %.2f ms, p99 %.2f ms, max %.2f ms, %d over 5 ms; slowest Redis call %.2f ms (%s); CPU steal %s%s\n",
			o.Members, o.Seconds, o.MembersPerSec, o.ReaderCalls, o.ReaderP50Ms, o.ReaderP99Ms, o.ReaderMaxMs, o.ReaderOver5ms, o.SlowestCallMs, o.SlowestCall, pct(o.StealPct), o.waited())
	}
	if p := r.Replay; p != nil {
		fmt.Fprintf(w, "replay: %d events into a new generation at %.0f events/s (%.2fs reading and applying, %.2fs in all with rollover, switch and deletion of the old generation); %d decided in memory\n",
			p.Events, p.EventsPerSec, p.Seconds, p.TotalSeconds, p.Decided)
	}
	if mm := r.Memory; mm != nil {
		fmt.Fprintf(w, "memory: %.1f bytes per board member (%d members in %d sorted sets, %s), %.1f bytes per message ID held (%d IDs in %d keys, %s; %.1f with allocator overhead), %s after the rankd drain (%.0f bytes per event)\n",
			mm.BytesPerBoardMember, mm.BoardMembers, mm.BoardKeys, mib(mm.BoardBytes), mm.BytesPerDedupeID, mm.DedupeIDs, mm.DedupeKeys,
			mib(mm.DedupeBytes), mm.BytesPerDedupeIDAll, mib(mm.UsedMemory), mm.BytesPerEvent)
	}
	for _, d := range []*Drain{r.Drain.Rankd, r.Drain.Naive, r.Drain.Seed} {
		if d != nil {
			for _, n := range d.Notes {
				fmt.Fprintln(w, n)
			}
		}
	}
}

func cmds(d *Drain) *Commands {
	if d == nil {
		return nil
	}
	return &d.Commands
}

func cpuOf(d *Drain) *CPU {
	if d == nil {
		return nil
	}
	return &d.CPU
}

func replayCPU(r *Replay) *CPU {
	if r == nil {
		return nil
	}
	return &r.CPU
}

func optInt(v *int64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatInt(*v, 10)
}

func opt(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", *v)
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// optPct is pct of an optional share, "-" when absent.
func optPct(p *float64) string {
	if p == nil {
		return "-"
	}
	return pct(*p)
}

// pct renders a percentage, or "unknown" for a negative one.
func pct(p float64) string {
	if p < 0 {
		return "unknown"
	}
	return fmt.Sprintf("%.1f%%", p)
}
