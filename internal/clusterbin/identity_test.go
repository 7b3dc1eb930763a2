package clusterbin

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/falconml/falcon/transport/transporttest"
)

const rolesWarning = "roles are not enforced"

// writeNodePKI writes a CA (ca.crt) and, for each node of a 2-server,
// 3-worker cluster, its own certificate and key ({node}.crt, {node}.key)
// naming it, as cert-manager would issue them; swap makes the files of
// the first name hold the certificate of the second.
func writeNodePKI(t *testing.T, dir string, swap ...string) {
	t.Helper()
	pki := transporttest.NewPKI(t, "falcon cluster test CA")
	write := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("ca.crt", pki.CAPEM)
	for _, n := range nodeNames(2, 3) {
		name := string(n)
		if len(swap) == 2 && name == swap[0] {
			name = swap[1]
		}
		c, k := pki.Issue(t, transporttest.CertOptions{}, name)
		write(string(n)+".crt", c)
		write(string(n)+".key", k)
	}
}

func nodeCertArgs(dir string) []string {
	return []string{"-node-cert=" + filepath.Join(dir, "{node}.crt"), "-node-key=" + filepath.Join(dir, "{node}.key"),
		"-node-ca=" + filepath.Join(dir, "ca.crt")}
}

// TestLocalCluster_NodeCerts runs the local mode with a certificate per
// node (roles enforced: no warning); then with worker-1 given worker-0's
// certificate, which must fail at once naming both.
func TestLocalCluster_NodeCerts(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of processes")
	}
	bin := buildBinary(t)
	run := func(dir string) (string, string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append(tinyArgs("bsp"), nodeCertArgs(dir)...)...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		return out.String(), errb.String(), err
	}
	dir := t.TempDir()
	writeNodePKI(t, dir)
	out, errs, err := run(dir)
	if err != nil {
		t.Fatalf("run: %v\nstdout:\n%s\nstderr:\n%s", err, out, errs)
	}
	checkSummary(t, out, "bsp")
	if strings.Contains(errs, rolesWarning) {
		t.Errorf("with per-node certificates the run warned that roles are not enforced:\n%s", errs)
	}

	bad := t.TempDir()
	writeNodePKI(t, bad, "worker-1", "worker-0")
	out, errs, err = run(bad)
	if err == nil {
		t.Fatalf("worker-1 holding worker-0's certificate: the run succeeded:\n%s", out)
	}
	if !strings.Contains(errs, `certificate names ["worker-0"] (DNS SANs), not this node "worker-1"`) {
		t.Errorf("the failure does not name worker-1 and its certificate's name worker-0:\n%s", errs)
	}
}

// Without per-node certificates the binary says, once, that roles are not
// enforced; with them it does not; -node-* go together and exclude -tls-*.
func TestTrustWarning(t *testing.T) {
	none := func(string) (string, bool) { return "", false }
	for _, tc := range []struct {
		args []string
		warn string
	}{
		{nil, "shared secret"}, // the local mode makes one
		{[]string{"-role=server", "-servers=1", "-workers=1", "-peers=coordinator=127.0.0.1:1,server-0=127.0.0.1:2,worker-0=127.0.0.1:3", "-secret=x"}, "shared secret"},
		{[]string{"-role=server", "-servers=1", "-workers=1", "-peers=coordinator=127.0.0.1:1,server-0=127.0.0.1:2,worker-0=127.0.0.1:3", "-listen=127.0.0.1:2"}, "taken on trust"},
		{[]string{"-node-cert=a", "-node-key=b", "-node-ca=c"}, ""},
	} {
		o, _, err := parseArgs(tc.args, none, io.Discard)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		w := o.trustWarning()
		if (tc.warn == "") != (w == "") || !strings.Contains(w, tc.warn) || (w != "" && !strings.Contains(w, rolesWarning)) {
			t.Errorf("%v: warning %q, want one saying %q", tc.args, w, tc.warn)
		}
	}
	env := map[string]string{"FALCON_NODE_CERT": "/tls/tls.crt", "FALCON_NODE_KEY": "/tls/tls.key", "FALCON_NODE_CA": "/tls/ca.crt"}
	o, _, err := parseArgs(nil, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, io.Discard)
	if err != nil || o.identityFiles("worker-0").Cert != "/tls/tls.crt" || o.trustWarning() != "" {
		t.Errorf("identity from the environment: %+v, %v", o, err)
	}
	for _, bad := range [][]string{
		{"-node-cert=a"},
		{"-node-cert=a", "-node-key=b", "-node-ca=c", "-tls-cert=d", "-tls-key=e", "-tls-ca=f"},
	} {
		if _, _, err := parseArgs(bad, none, io.Discard); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
