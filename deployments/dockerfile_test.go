package deployments

import (
	"encoding/json"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// stage is one FROM ... stage of a Dockerfile.
type stage struct {
	from, name string
	copies     []copyInstr
	runs       []string
	expose     []string
	user       string
	entrypoint []string
	cmd        []string
}

type copyInstr struct {
	from    string // --from stage, "" for the build context
	sources []string
	dest    string
}

type parsedDockerfile struct{ stages []*stage }

func (d parsedDockerfile) final() *stage { return d.stages[len(d.stages)-1] }

// stage returns the stage named name, or nil.
func (d parsedDockerfile) stage(name string) *stage {
	for _, s := range d.stages {
		if s.name == name {
			return s
		}
	}
	return nil
}

// parseDockerfile parses deployments/Dockerfile: line continuations,
// comments, and the instructions the tests read.
func parseDockerfile(t *testing.T) parsedDockerfile {
	t.Helper()
	var (
		d    parsedDockerfile
		line string
	)
	for raw := range strings.Lines(string(readFile(t, dockerfile))) {
		raw = strings.TrimRight(raw, "\r\n")
		if trimmed := strings.TrimSpace(raw); line == "" && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if strings.HasPrefix(strings.TrimSpace(raw), "#") {
			continue // comment inside a continued instruction
		}
		if cont, ok := strings.CutSuffix(raw, `\`); ok {
			line += cont + " "
			continue
		}
		line += raw
		instr, args, _ := strings.Cut(strings.TrimSpace(line), " ")
		line = ""
		args = strings.TrimSpace(args)
		instr = strings.ToUpper(instr)
		if instr != "FROM" && instr != "ARG" && len(d.stages) == 0 {
			t.Fatalf("%s: %s before FROM", dockerfile, instr)
		}
		var cur *stage
		if len(d.stages) > 0 {
			cur = d.final()
		}
		switch instr {
		case "FROM":
			f := strings.Fields(args)
			s := &stage{from: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				s.name = f[2]
			}
			d.stages = append(d.stages, s)
		case "COPY", "ADD":
			var c copyInstr
			f := strings.Fields(args)
			for len(f) > 0 && strings.HasPrefix(f[0], "--") {
				if v, ok := strings.CutPrefix(f[0], "--from="); ok {
					c.from = v
				}
				f = f[1:]
			}
			if len(f) < 2 {
				t.Fatalf("%s: %s %s: want sources and a destination", dockerfile, instr, args)
			}
			c.sources, c.dest = f[:len(f)-1], f[len(f)-1]
			cur.copies = append(cur.copies, c)
		case "RUN":
			cur.runs = append(cur.runs, args)
		case "EXPOSE":
			for _, p := range strings.Fields(args) {
				p, _, _ = strings.Cut(p, "/")
				cur.expose = append(cur.expose, p)
			}
		case "USER":
			cur.user = args
		case "ENTRYPOINT", "CMD":
			var v []string
			if err := json.Unmarshal([]byte(args), &v); err != nil {
				t.Errorf("%s: %s %s: use the JSON (exec) form: %v", dockerfile, instr, args, err)
			}
			if instr == "CMD" {
				cur.cmd = v
			} else {
				cur.entrypoint = v
			}
		}
	}
	if len(d.stages) == 0 {
		t.Fatalf("%s: no FROM", dockerfile)
	}
	return d
}

var (
	goDirective = regexp.MustCompile(`(?m)^go (\d+\.\d+)`)
	goBuild     = regexp.MustCompile(`\bgo build\b.*?\s(\./\S+)\s*$`)
)

// TestDockerfile: a multi-stage build of ./cmd/rankd with the Go version of
// go.mod, a static binary, a non-root final stage, COPY sources that exist
// (and are not excluded from the context), the config at the path CMD
// reads.
func TestDockerfile(t *testing.T) {
	d := parseDockerfile(t)
	if len(d.stages) < 2 {
		t.Fatalf("%s: want a multi-stage build, got %d stage(s)", dockerfile, len(d.stages))
	}
	builder := d.stages[0]
	m := goDirective.FindSubmatch(readFile(t, "go.mod"))
	if m == nil {
		t.Fatal("go.mod: no go directive")
	}
	if want := "golang:" + string(m[1]); !strings.HasPrefix(builder.from, want) {
		t.Errorf("%s: builder FROM %s, want %s (go.mod says go %s)", dockerfile, builder.from, want, m[1])
	}

	var target, out string
	for _, r := range builder.runs {
		if !strings.Contains(r, "go build") {
			continue
		}
		// -tags nodev: the image has no `rankd dev` and does not link its
		// embedded servers (cmd/rankd's TestNodev checks the dependencies).
		for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "-tags nodev"} {
			if !strings.Contains(r, want) {
				t.Errorf("%s: go build without %s: %s", dockerfile, want, r)
			}
		}
		if mm := goBuild.FindStringSubmatch(r); mm != nil {
			target = mm[1]
		}
		if _, o, ok := strings.Cut(r, " -o "); ok {
			out = strings.Fields(o)[0]
		}
	}
	if target != "./"+cmdDir {
		t.Errorf("%s: builds %q, want ./%s", dockerfile, target, cmdDir)
	}
	if !isMainPackage(t, cmdDir) {
		t.Errorf("%s: build target ./%s is not a main package", dockerfile, cmdDir)
	}
	if !strings.Contains(strings.Join(builder.runs, "\n"), "go mod download") {
		t.Errorf("%s: no `go mod download` layer", dockerfile)
	}

	pats := dockerignore(t)
	if p, ok := ignored(pats, cmdDir); ok {
		t.Errorf("%s.dockerignore: %q excludes %s from the build context", dockerfile, p, cmdDir)
	}
	for _, s := range d.stages {
		for _, c := range s.copies {
			if c.from != "" {
				if d.stage(c.from) == nil {
					t.Errorf("%s: COPY --from=%s: no such stage", dockerfile, c.from)
				}
				continue
			}
			for _, src := range c.sources {
				if src == "." {
					continue
				}
				if _, err := os.Stat(repoPath(t, src)); err != nil {
					t.Errorf("%s: COPY source %s does not exist in the build context (the repository root)", dockerfile, src)
				}
				if p, ok := ignored(pats, src); ok {
					t.Errorf("%s: COPY source %s is excluded from the build context by %q", dockerfile, src, p)
				}
			}
		}
	}

	final := d.final()
	if u, _, _ := strings.Cut(final.user, ":"); u == "" || u == "root" || u == "0" {
		t.Errorf("%s: final stage runs as %q, want a non-root USER", dockerfile, final.user)
	}
	if !strings.HasPrefix(final.from, "gcr.io/distroless/static") && final.from != "scratch" {
		t.Errorf("%s: final stage FROM %s, want distroless static or scratch", dockerfile, final.from)
	}
	if len(final.entrypoint) != 1 {
		t.Fatalf("%s: ENTRYPOINT %v, want the binary alone", dockerfile, final.entrypoint)
	}
	var binCopied bool
	var cfgDest string
	for _, c := range final.copies {
		if c.from == builder.name && len(c.sources) == 1 && c.sources[0] == out && c.dest == final.entrypoint[0] {
			binCopied = true
		}
		if c.from == "" && len(c.sources) == 1 && c.sources[0] == stackConfig {
			cfgDest = c.dest
		}
	}
	if !binCopied {
		t.Errorf("%s: the final stage does not copy the built %s to ENTRYPOINT %s", dockerfile, out, final.entrypoint[0])
	}
	cfgPath, ok := stringList(final.cmd).flag("config")
	if len(final.cmd) == 0 || final.cmd[0] != "run" || !ok {
		t.Errorf("%s: CMD %v, want [run --config FILE]", dockerfile, final.cmd)
	}
	if cfgDest == "" || path.Clean(cfgDest) != cfgPath {
		t.Errorf("%s: COPY %s to %q, but CMD reads --config %q", dockerfile, stackConfig, cfgDest, cfgPath)
	}
}

// isMainPackage reports whether dir holds non-test Go files of package main.
func isMainPackage(t *testing.T, dir string) bool {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(repoPath(t, dir), "*.go"))
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.PackageClauseOnly)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		return file.Name.Name == "main"
	}
	return false
}
