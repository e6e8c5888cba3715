package bench

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestRenice renices a redis-server child to 5 (raising a nice value needs
// no privilege) and reads every thread's nice value back from /proc.
func TestRenice(t *testing.T) {
	r := startRedis(t)
	if err := renice(r.PID(), 5); err != nil {
		t.Fatal(err)
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", r.PID()))
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) == 0 {
		t.Fatal("no threads")
	}
	for _, task := range tasks {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", r.PID(), task.Name()))
		if err != nil {
			t.Fatal(err)
		}
		// fields after the command's closing parenthesis: state is the
		// first (field 3), nice the 17th (field 19)
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(f) < 17 || f[16] != "5" {
			t.Errorf("thread %s: nice %v, want 5", task.Name(), f[16:17])
		}
	}
}
