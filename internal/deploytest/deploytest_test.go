package deploytest

import (
	"strings"
	"testing"
)

func TestExpand(t *testing.T) {
	vars := map[string]string{"POD_IP": "127.1.2.3", "N": "4"}
	for _, c := range []struct{ in, want string }{
		{"-listen=$(POD_IP):7000", "-listen=127.1.2.3:7000"},
		{"$(N)$(N)", "44"},
		{"-x=$(MISSING)", "-x=$(MISSING)"},
		{"$POD_IP", "$POD_IP"},
		{"", ""},
	} {
		if got := Expand(c.in, vars); got != c.want {
			t.Errorf("Expand(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestPodNet(t *testing.T) {
	n := PodNet()
	if !strings.HasPrefix(n, "127.") || !strings.HasSuffix(n, ".") || strings.Count(n, ".") != 3 {
		t.Errorf("PodNet() = %q, want 127.a.b.", n)
	}
}
