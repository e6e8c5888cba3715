package config

import "testing"

// TestSyntaxErrorPositions checks that a YAML syntax error is reported at
// file:line:column of the character where the parser gave up (issue 11:
// yaml.v3 gives no column, and a line that is sometimes that of the
// enclosing construct, counted from 0, or missing).
func TestSyntaxErrorPositions(t *testing.T) {
	for _, tt := range []struct {
		name, src, want string
	}{
		{"tab indent", "kafka:\n\tbrokers: [a]\n", "t.yaml:2:1: found character that cannot start any token (this line is indented with a tab: YAML indents with spaces only)"},
		{"tab after spaces", "boards:\n  - name: a\n  \t every: 1d\n", "t.yaml:3:3: found a tab character that violates indentation (this line is indented with a tab: YAML indents with spaces only)"},
		{"mapping value in a scalar", "kafka:\n  brokers: a: b\n", "t.yaml:2:13: mapping values are not allowed in this context"},
		{"unclosed quote", "kafka:\n  brokers: \"abc\nredis: {}\n", "t.yaml:2:12: found unexpected end of stream"},
		{"unclosed single quote", "a: 'x\nb: 2\n", "t.yaml:1:4: found unexpected end of stream"},
		{"unclosed flow list", "kafka:\n  brokers: [a\nredis: {}\n", "t.yaml:2:13: did not find expected ',' or ']'"},
		{"bad indent", "kafka:\n  brokers: [a]\n bad: 1\n", "t.yaml:3:2: did not find expected key"},
		{"list item in a mapping", "kafka:\n  brokers: [a]\n  - x\n", "t.yaml:3:3: did not find expected key"},
		{"key without colon", "a: b\nc\nd: e\n", "t.yaml:2:1: could not find expected ':'"},
		{"reserved character", "a: @x\n", "t.yaml:1:4: found character that cannot start any token"},
		{"nested mapping under a scalar", "a: b\n  c: d\n", "t.yaml:2:4: mapping values are not allowed in this context"},
		{"mapping after a list", "- a\nb: c\n", "t.yaml:2:2: did not find expected '-' indicator"},
		{"stray bracket", "kafka: {brokers: [a], b: ]\n", "t.yaml:1:24: did not find expected node content"},
		{"board name", "boards:\n  - name: [\n", "t.yaml:2:11: did not find expected node content"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadBytes("t.yaml", []byte(tt.src))
			if err == nil || err.Error() != tt.want {
				t.Errorf("error\n got %v\nwant %s", err, tt.want)
			}
		})
	}
}
