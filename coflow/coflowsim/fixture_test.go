package coflowsim

import (
	"bytes"
	"fmt"
	"github.com/falconml/falcon/coflow"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sharedData finds shared/data/<name> beside an ancestor of the working
// directory, or under $FALCON_SHARED.
func sharedData(t testing.TB, name string) string {
	t.Helper()
	if root := os.Getenv("FALCON_SHARED"); root != "" {
		for _, p := range []string{filepath.Join(root, "data", name), filepath.Join(root, name)} {
			if st, err := os.Stat(p); err == nil && st.IsDir() {
				return p
			}
		}
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Skipf("no working directory: %v", err)
	}
	for {
		p := filepath.Join(dir, "shared", "data", name)
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skipf("shared/data/%s not found beside any ancestor of the working directory (set FALCON_SHARED); skipping", name)
		}
		dir = parent
	}
}

type cmpStats struct {
	total, matchTimes, matchLine int
	firstBad                     string
	bad                          []string
}

func compareFixture(t *testing.T, dir, trace, sched string) cmpStats {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, trace+".txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := coflow.ReadTrace(f)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(tr, sched, DefaultConfig())
	if err != nil {
		return cmpStats{firstBad: err.Error()}
	}
	var buf bytes.Buffer
	if err := WriteReference(&buf, res); err != nil {
		t.Fatal(err)
	}
	wantB, err := os.ReadFile(filepath.Join(dir, trace+"."+sched+".out"))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := strings.Split(strings.TrimSpace(string(wantB)), "\n")
	var st cmpStats
	for i := 0; i < len(want)-1; i++ {
		st.total++
		if i >= len(got)-1 {
			continue
		}
		g, w := strings.Fields(got[i]), strings.Fields(want[i])
		if len(g) >= 8 && len(w) >= 8 && g[0] == w[0] && g[1] == w[1] && g[2] == w[2] && g[7] == w[7] {
			st.matchTimes++
		} else {
			if st.firstBad == "" {
				st.firstBad = fmt.Sprintf("line %d:\n got  %s\n want %s", i+1, got[i], want[i])
			}
			if len(g) >= 8 && len(w) >= 8 {
				st.bad = append(st.bad, fmt.Sprintf("%s[%s %s/%s]", w[0], w[1], g[2], w[2]))
			}
		}
		if got[i] == want[i] {
			st.matchLine++
		}
	}
	return st
}

func TestFixturesReport(t *testing.T) {
	dir := sharedData(t, "coflowsim-fixtures")
	for _, sched := range strings.Fields(os.Getenv("SCHEDS")) {
		for _, trace := range []string{"synth-a", "synth-b"} {
			st := compareFixture(t, dir, trace, sched)
			t.Logf("%s %s: times %d/%d, full lines %d/%d\n%s", trace, sched, st.matchTimes, st.total, st.matchLine, st.total, st.firstBad)
			if os.Getenv("BAD") != "" {
				t.Log(st.bad)
			}
		}
	}
}
