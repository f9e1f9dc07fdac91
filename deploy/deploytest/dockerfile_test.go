package deploytest

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// dockerfileInstructions returns the Dockerfile's instructions, continuation lines joined
// and comments dropped.
func dockerfileInstructions(t *testing.T) []string {
	t.Helper()
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(string(readFile(t, filepath.Join(repoRoot(t), "Dockerfile"))), "\n") {
		trimmed := strings.TrimSpace(line)
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if rest, cont := strings.CutSuffix(trimmed, `\`); cont {
			cur.WriteString(rest + " ")
			continue
		}
		cur.WriteString(trimmed)
		out = append(out, cur.String())
		cur.Reset()
	}
	return out
}

// goBuild is the RUN instruction that builds the binaries.
func goBuild(t *testing.T) string {
	t.Helper()
	var builds []string
	for _, ins := range dockerfileInstructions(t) {
		if strings.HasPrefix(ins, "RUN ") && strings.Contains(ins, "go build") {
			builds = append(builds, ins)
		}
	}
	if len(builds) != 1 {
		t.Fatalf("want one RUN with go build in the Dockerfile, got %d", len(builds))
	}
	return builds[0]
}

var cmdPackage = regexp.MustCompile(`\./cmd/([A-Za-z0-9_-]+)`)

// dockerfileBinaries is the set of binaries the image contains.
func dockerfileBinaries(t *testing.T) map[string]bool {
	t.Helper()
	built := map[string]bool{}
	for _, m := range cmdPackage.FindAllStringSubmatch(goBuild(t), -1) {
		built[m[1]] = true
	}
	return built
}

// dockerfileUser is the numeric user of the final stage.
func dockerfileUser(t *testing.T) int64 {
	t.Helper()
	var user string
	for _, ins := range dockerfileInstructions(t) {
		if strings.HasPrefix(ins, "FROM ") {
			user = "" // a stage starts as root
		}
		if u, ok := strings.CutPrefix(ins, "USER "); ok {
			user, _, _ = strings.Cut(strings.TrimSpace(u), ":")
		}
	}
	uid, err := strconv.ParseInt(user, 10, 64)
	if err != nil || uid == 0 {
		t.Fatalf("the final stage's USER is %q, want a numeric non-root user (runAsNonRoot can only verify a number)", user)
	}
	return uid
}

func TestDockerfileBuildsStaticBinaries(t *testing.T) {
	ins := dockerfileInstructions(t)
	var froms []string
	for _, i := range ins {
		if f, ok := strings.CutPrefix(i, "FROM "); ok {
			froms = append(froms, f)
		}
	}
	if len(froms) < 2 || !strings.HasPrefix(froms[0], "golang:1.26") {
		t.Errorf("want a golang:1.26 builder stage and a runtime stage, got FROM %q", froms)
	}
	build := goBuild(t)
	cgoOff := strings.Contains(build, "CGO_ENABLED=0") || slices.ContainsFunc(ins, func(i string) bool {
		return strings.HasPrefix(i, "ENV ") && strings.Contains(i, "CGO_ENABLED=0")
	})
	if !cgoOff {
		t.Error("CGO_ENABLED=0 is not set for go build: the binaries would need libc")
	}
	if !strings.Contains(build, "-trimpath") {
		t.Error("go build without -trimpath")
	}
	if !regexp.MustCompile(`-ldflags=?["']?[^"']*-s\b`).MatchString(build) {
		t.Error("go build without -ldflags -s")
	}
	if !slices.ContainsFunc(ins, func(i string) bool { return strings.HasPrefix(i, "COPY --from=") }) {
		t.Error("the runtime stage copies nothing from the builder")
	}
	dockerfileUser(t)
}

func TestDockerfileBuildsEveryCommand(t *testing.T) {
	built := dockerfileBinaries(t)
	for _, b := range append([]string{"agentmem"}, workerBinaries...) {
		if !built[b] {
			t.Errorf("the Dockerfile does not build ./cmd/%s", b)
		}
	}
	entries, err := os.ReadDir(filepath.Join(repoRoot(t), "cmd"))
	if os.IsNotExist(err) {
		t.Skip("cmd/ does not exist yet: the Dockerfile's package list is checked against the expected binaries only")
	}
	if err != nil {
		t.Fatal(err)
	}
	dirs := map[string]bool{}
	for _, e := range entries {
		if e.IsDir() {
			dirs[e.Name()] = true
		}
	}
	for d := range dirs {
		if !built[d] {
			t.Errorf("cmd/%s exists but the Dockerfile does not build it", d)
		}
	}
	for b := range built {
		if !dirs[b] {
			t.Errorf("the Dockerfile builds ./cmd/%s, which does not exist", b)
		}
	}
}
