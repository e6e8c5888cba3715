package deployments

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
)

// goCode matches what a HELP text should not hold: Go identifiers an
// operator cannot know (Store.Apply, applyDur, Run()).
var goCode = regexp.MustCompile(`\b[A-Z][A-Za-z0-9]*\.[A-Z][A-Za-z0-9]*\b|\b[a-z]+[A-Z][A-Za-z0-9]*\b|\b[A-Za-z_][A-Za-z0-9_]*\(\)`)

// lintTimestamp: a gauge that holds a point in time (its HELP says Unix
// time) is named ..._timestamp_seconds, and only such a gauge is (the
// Prometheus naming convention; a plain _seconds metric is a duration).
func lintTimestamp(mf *dto.MetricFamily) []error {
	name, help := mf.GetName(), mf.GetHelp()
	isTime := strings.Contains(help, "Unix")
	named := strings.HasSuffix(name, "_timestamp_seconds")
	switch {
	case isTime && !named:
		return []error{errors.New(`holds a Unix time (its HELP says so): name it ..._timestamp_seconds`)}
	case named && !isTime:
		return []error{errors.New(`is named _timestamp_seconds but its HELP does not say it is a Unix time in seconds`)}
	case named && mf.GetType() != dto.MetricType_GAUGE:
		return []error{fmt.Errorf("a timestamp is a gauge, not a %s", mf.GetType())}
	}
	return nil
}

// lintHelpGoCode: a HELP text says what the metric means to an operator,
// without naming Go functions, types or fields.
func lintHelpGoCode(mf *dto.MetricFamily) []error {
	if m := goCode.FindString(mf.GetHelp()); m != "" {
		return []error{fmt.Errorf("HELP names Go code (%q): describe what it measures instead", m)}
	}
	return nil
}

// TestMetricConventions lints every metric rankd registers (consumer,
// sink, rollover, finality, standings, HTTP API) with client_golang's
// promlint (what `promtool check metrics` runs) and two rules of ours:
// Unix times are gauges named _timestamp_seconds, and HELP texts name no
// Go code.
func TestMetricConventions(t *testing.T) {
	m := consumerMetrics(t)
	l := promlint.NewWithMetricFamilies(m.families)
	l.AddCustomValidations(lintTimestamp, lintHelpGoCode)
	problems, err := l.Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
	if len(m.families) < 30 {
		t.Errorf("only %d metrics recorded: the recorder misses some", len(m.families))
	}
}

// TestLintRules: the two rules of ours catch what they are for.
func TestLintRules(t *testing.T) {
	gauge, counter := dto.MetricType_GAUGE, dto.MetricType_COUNTER
	family := func(name, help string, typ dto.MetricType) *dto.MetricFamily {
		return &dto.MetricFamily{Name: &name, Help: &help, Type: typ.Enum()}
	}
	tests := []struct {
		name string
		mf   *dto.MetricFamily
		bad  bool
	}{
		{"time named _seconds", family("x_start_seconds", "Start (Unix seconds) of it.", gauge), true},
		{"time named _timestamp_seconds", family("x_start_timestamp_seconds", "Start (Unix seconds) of it.", gauge), false},
		{"duration", family("x_overdue_seconds", "How long it is late.", gauge), false},
		{"timestamp without Unix", family("x_timestamp_seconds", "How long it is late.", gauge), true},
		{"timestamp counter", family("x_timestamp_seconds", "Unix seconds.", counter), true},
		{"method", family("x_total", "Failed Store.Apply calls.", counter), true},
		{"field", family("x_total", "Counts applyDur.", counter), true},
		{"call", family("x_total", "Failed apply() calls.", counter), true},
		{"plain words", family("x_total", "Failed writes to Redis (SET NX, one Lua call per slot), per board.", counter), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := append(lintTimestamp(tt.mf), lintHelpGoCode(tt.mf)...)
			if bad := len(errs) > 0; bad != tt.bad {
				t.Errorf("%s %q: problems %v, want bad=%v", tt.mf.GetName(), tt.mf.GetHelp(), errs, tt.bad)
			}
		})
	}
}
