package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// selfUsage returns the CPU time (user + system) this process has used
// and the minor page faults it has taken: pages of memory touched for the
// first time since the kernel gave them (or took them back).
func selfUsage() (cpu time.Duration, faults int64, ok bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), ru.Minflt, true
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times; 100 on every
// Linux architecture Go supports.
const clockTicks = 100

// pidCPU returns the CPU time (user + system) process pid has used, from
// /proc/<pid>/stat.
func pidCPU(pid int) (time.Duration, bool) {
	f, ok := pidStat(pid, 14, 15)
	if !ok {
		return 0, false
	}
	return time.Duration(f[0]+f[1]) * time.Second / clockTicks, true
}

// pidFaults returns the minor page faults process pid has taken, from
// /proc/<pid>/stat.
func pidFaults(pid int) (int64, bool) {
	f, ok := pidStat(pid, 10)
	if !ok {
		return 0, false
	}
	return f[0], true
}

// pidStat returns the numeric fields of /proc/<pid>/stat numbered fields
// (from 1, as proc(5) numbers them; 3 on).
func pidStat(pid int, fields ...int) ([]int64, bool) {
	if pid <= 0 {
		return nil, false
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, false
	}
	// The command name (field 2) may hold spaces: count fields after its ')'.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, false
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	out := make([]int64, len(fields))
	for j, n := range fields {
		if n < 3 || n-3 >= len(f) {
			return nil, false
		}
		v, err := strconv.ParseInt(f[n-3], 10, 64)
		if err != nil {
			return nil, false
		}
		out[j] = v
	}
	return out, true
}

// readSteal reads the machine's CPU time so far from /proc/stat (its
// "cpu" line, in USER_HZ ticks).
func readSteal() stealReading {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return stealReading{}
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return stealReading{}
	}
	var r stealReading
	for i := 1; i <= 8; i++ { // user nice system idle iowait irq softirq steal
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return stealReading{}
		}
		r.total += v
	}
	r.steal, _ = strconv.ParseInt(f[8], 10, 64)
	r.ok = true
	return r
}

// pidWait returns how long the main thread of process pid has waited, in
// all, for a CPU while runnable (/proc/<pid>/schedstat, the scheduler's
// run-queue time) and how often it was preempted (nonvoluntary_ctxt_switches
// of /proc/<pid>/status). For Redis, whose main thread runs every command,
// that is time its clients waited without Redis doing their work.
func pidWait(pid int) (wait time.Duration, preempted int64, ok bool) {
	if pid <= 0 {
		return 0, 0, false
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
	if err != nil {
		return 0, 0, false
	}
	f := strings.Fields(string(data)) // run time (ns), wait time (ns), timeslices
	if len(f) < 2 {
		return 0, 0, false
	}
	ns, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0, 0, false
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, false
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, found := strings.CutPrefix(line, "nonvoluntary_ctxt_switches:"); found {
			if preempted, err = strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				return time.Duration(ns), preempted, true
			}
		}
	}
	return 0, 0, false
}

// renice sets the nice value of every thread of process pid (Linux's
// setpriority sets one thread's; the threads Redis starts before it is
// reniced keep their own).
func renice(pid, nice int) error {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice); err != nil {
			return fmt.Errorf("setpriority of thread %d of process %d: %w", tid, pid, err)
		}
	}
	return nil
}
