package clusterbin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/falconml/falcon/internal/deploytest"
)

// jobSet is the part of a JobSet manifest the test reads.
type jobSet struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Network struct {
			EnableDNSHostnames bool   `json:"enableDNSHostnames"`
			Subdomain          string `json:"subdomain"`
		} `json:"network"`
		ReplicatedJobs []struct {
			Name     string `json:"name"`
			Replicas int    `json:"replicas"`
			Template struct {
				Spec struct {
					Parallelism    int    `json:"parallelism"`
					Completions    int    `json:"completions"`
					CompletionMode string `json:"completionMode"`
					BackoffLimit   int    `json:"backoffLimit"`
					Template       struct {
						Spec struct {
							RestartPolicy string `json:"restartPolicy"`
							Volumes       []struct {
								Name     string    `json:"name"`
								EmptyDir *struct{} `json:"emptyDir"`
							} `json:"volumes"`
							Containers []struct {
								Args         []string `json:"args"`
								VolumeMounts []struct {
									Name      string `json:"name"`
									MountPath string `json:"mountPath"`
								} `json:"volumeMounts"`
								Env []struct {
									Name      string `json:"name"`
									Value     string `json:"value"`
									ValueFrom *struct {
										FieldRef *struct {
											FieldPath string `json:"fieldPath"`
										} `json:"fieldRef"`
										SecretKeyRef *struct {
											Name string `json:"name"`
											Key  string `json:"key"`
										} `json:"secretKeyRef"`
									} `json:"valueFrom"`
								} `json:"env"`
							} `json:"containers"`
						} `json:"spec"`
					} `json:"template"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"replicatedJobs"`
	} `json:"spec"`
}

// TestDeploy_JobSet reads deploy/jobset.json and runs every pod it
// describes as a process with exactly the pod's arguments (after
// Kubernetes' $(VAR) expansion) and environment: JOB_COMPLETION_INDEX as
// an indexed Job sets it, POD_IP from the downward API (one loopback
// address per pod in a random loopback /24, .2 onwards), FALCON_SECRET from the secret.
// Cluster DNS for the pods' hostnames (<jobset>-<job>-<job index>-<pod
// index>.<subdomain>) is stood in for twice: by FALCON_HOSTS mapping them
// to the pods' addresses (everywhere), and, as root with iproute2, by a
// network namespace whose /etc/hosts names the pods, so that the
// processes get exactly the pods' environment. The run must end with
// every process exiting 0, the coordinator's summary line and every
// worker's 50 clocks.
func TestDeploy_JobSet(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of processes")
	}
	raw, err := os.ReadFile(filepath.Join(cmdDir, "deploy/jobset.json"))
	if err != nil {
		t.Fatal(err)
	}
	var js jobSet
	if err := json.Unmarshal(raw, &js); err != nil {
		t.Fatalf("deploy/jobset.json: %v", err)
	}
	if js.Kind != "JobSet" || !js.Spec.Network.EnableDNSHostnames || js.Spec.Network.Subdomain == "" {
		t.Fatalf("not a JobSet with DNS hostnames: %+v", js)
	}
	const secret = "a-test-secret-for-the-manifests"
	var pods []pod
	var hosts []string
	ip, subnet := 2, deploytest.PodNet()
	for _, rj := range js.Spec.ReplicatedJobs {
		spec := rj.Template.Spec
		if rj.Replicas != 1 || spec.CompletionMode != "Indexed" || spec.Parallelism != spec.Completions || len(spec.Template.Spec.Containers) != 1 {
			t.Fatalf("replicated job %s: want 1 replica of an Indexed job running all its completions at once, one container", rj.Name)
		}
		ctr := spec.Template.Spec.Containers[0]
		// The coordinator and the servers keep their state on a volume
		// and restart from it (OnFailure: the container restarts in its
		// pod, with its address, name and volume); a worker restarted
		// would be refused (it cannot rejoin the run it left).
		wantRestart := map[string]string{"coordinator": "OnFailure", "server": "OnFailure", "worker": "Never"}[rj.Name]
		if pol := spec.Template.Spec.RestartPolicy; pol != wantRestart || (pol == "OnFailure") != (spec.BackoffLimit > 0) {
			t.Fatalf("replicated job %s: restartPolicy %q backoffLimit %d, want %q (with a backoff limit to restart)", rj.Name, pol, spec.BackoffLimit, wantRestart)
		}
		if wantRestart == "OnFailure" && len(ctr.VolumeMounts) == 0 {
			t.Fatalf("replicated job %s restarts without a volume to restart from", rj.Name)
		}
		for idx := range spec.Completions {
			podIP := fmt.Sprintf("%s%d", subnet, ip)
			ip++
			host := fmt.Sprintf("%s-%s-0-%d.%s", js.Metadata.Name, rj.Name, idx, js.Spec.Network.Subdomain)
			hosts = append(hosts, host+"="+podIP)
			vars := map[string]string{"JOB_COMPLETION_INDEX": fmt.Sprint(idx)}
			env := []string{"JOB_COMPLETION_INDEX=" + fmt.Sprint(idx)}
			for _, e := range ctr.Env {
				v := e.Value
				switch {
				case e.ValueFrom == nil:
				case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP":
					v = podIP
				case e.ValueFrom.SecretKeyRef != nil:
					v = secret
				default:
					t.Fatalf("%s: env %s from a source the test does not know", rj.Name, e.Name)
				}
				vars[e.Name] = v
				env = append(env, e.Name+"="+v)
			}
			var mounts []string
			for _, vm := range ctr.VolumeMounts {
				found := false
				for _, v := range spec.Template.Spec.Volumes {
					found = found || (v.Name == vm.Name && v.EmptyDir != nil)
				}
				if !found {
					t.Fatalf("%s: volume mount %s names no emptyDir volume", rj.Name, vm.Name)
				}
				mounts = append(mounts, vm.MountPath)
			}
			var args []string
			for _, a := range ctr.Args {
				args = append(args, deploytest.Expand(a, vars))
			}
			pods = append(pods, pod{name: fmt.Sprintf("%s-%d", rj.Name, idx), args: args, env: env, mounts: mounts})
		}
	}
	if len(pods) != 6 {
		t.Fatalf("%d pods, want 6 (coordinator, 2 servers, 3 workers)", len(pods))
	}
	bin := buildBinary(t)
	t.Run("hosts-table", func(t *testing.T) {
		runPods(t, bin, pods, nil, []string{"FALCON_HOSTS=" + strings.Join(hosts, ",")}, nil)
	})
	t.Run("coordinator-killed", func(t *testing.T) {
		// kill -9 of the coordinator's process once it has reported its
		// second progress line (clock 10 or so of 50),
		// then the same command again, as restartPolicy OnFailure runs it:
		// it resumes the run from its volume and every node finishes
		runPods(t, bin, pods, nil, []string{"FALCON_HOSTS=" + strings.Join(hosts, ",")},
			&podKill{pod: "coordinator-0", after: "coordinator: clock ", count: 2})
	})
	t.Run("netns-dns", func(t *testing.T) {
		// As root with iproute2: every pod in one network namespace whose
		// /etc/hosts (ip netns exec's /etc/netns/<ns>/hosts) names the
		// pods, so the processes get exactly the pods' environment.
		if os.Geteuid() != 0 {
			t.Skip("needs root (a network namespace with its own /etc/hosts)")
		}
		if _, err := exec.LookPath("ip"); err != nil {
			t.Skip("needs iproute2 (ip not found)")
		}
		ns := fmt.Sprintf("fldeploy%d", os.Getpid()%100000)
		if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
			t.Skipf("cannot make a network namespace here: %v: %s", err, out)
		}
		dir := "/etc/netns/" + ns
		_, statErr := os.Stat("/etc/netns")
		t.Cleanup(func() {
			exec.Command("ip", "netns", "del", ns).Run()
			os.RemoveAll(dir)
			if os.IsNotExist(statErr) {
				os.Remove("/etc/netns") // ours: leave the machine as it was
			}
		})
		if out, err := exec.Command("ip", "-n", ns, "link", "set", "lo", "up").CombinedOutput(); err != nil {
			t.Fatalf("lo up: %v: %s", err, out)
		}
		var table strings.Builder
		table.WriteString("127.0.0.1 localhost\n")
		for _, h := range hosts {
			name, ip, _ := strings.Cut(h, "=")
			fmt.Fprintf(&table, "%s %s\n", ip, name)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dir+"/hosts", []byte(table.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		runPods(t, bin, pods, []string{"ip", "netns", "exec", ns}, nil, nil)
	})
}

// pod is one process a manifest describes.
type pod struct {
	name   string
	args   []string
	env    []string
	mounts []string // mount paths of its emptyDir volumes
}

// withVolumes returns p's arguments with each volume's mount path
// replaced by a new directory (an emptyDir, new with every pod; a
// container restarted in its pod keeps it).
func (p pod) withVolumes(t *testing.T) []string {
	dirs := map[string]string{}
	for _, mp := range p.mounts {
		dirs[mp] = t.TempDir()
	}
	var args []string
	for _, a := range p.args {
		for mp, dir := range dirs {
			if k, v, ok := strings.Cut(a, "="); ok && (v == mp || strings.HasPrefix(v, mp+"/")) {
				a = k + "=" + dir + strings.TrimPrefix(v, mp)
			}
		}
		args = append(args, a)
	}
	return args
}

// runPods runs every pod at once (under prefix, e.g. ip netns exec ns)
// with its environment plus extra and what a Go binary needs to run
// (PATH, HOME), and checks that all exit 0, the coordinator prints its
// summary and every worker trains its 50 clocks.
//
// With kill, pod kill.pod is killed with SIGKILL once its output has
// kill.count lines starting with kill.after, and run again with the same command (a
// container restarted in its pod); its second run is the one checked.
func runPods(t *testing.T, bin string, pods []pod, prefix, extra []string, kill *podKill) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	type result struct {
		name     string
		err      error
		out, log string
	}
	results := make(chan result, len(pods))
	var wg sync.WaitGroup
	for _, p := range pods {
		wg.Add(1)
		pargs := p.withVolumes(t)
		go func() {
			defer wg.Done()
			argv := append(append(append([]string(nil), prefix...), bin), pargs...)
			cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
			cmd.Env = append(append(append([]string(nil), p.env...), extra...), "PATH="+os.Getenv("PATH"), "HOME="+os.Getenv("HOME"))
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			if kill != nil && kill.pod == p.name {
				lw := &lineWatch{prefix: kill.after, count: kill.count, seen: make(chan struct{})}
				cmd.Stdout = io.MultiWriter(&out, lw)
				if err := cmd.Start(); err != nil {
					results <- result{p.name, err, "", ""}
					return
				}
				exited := make(chan error, 1)
				go func() { exited <- cmd.Wait() }()
				var err error
				select {
				case <-lw.seen:
					cmd.Process.Kill()
					err = <-exited
				case err = <-exited:
				}
				if err == nil {
					results <- result{p.name, fmt.Errorf("exited 0 before the kill"), out.String(), errb.String()}
					return
				}
				t.Logf("pod %s killed after %q; running it again", p.name, kill.after)
				cmd = exec.CommandContext(ctx, argv[0], argv[1:]...)
				cmd.Env = append(append(append([]string(nil), p.env...), extra...), "PATH="+os.Getenv("PATH"), "HOME="+os.Getenv("HOME"))
				out.Reset()
				errb.Reset()
				cmd.Stdout, cmd.Stderr = &out, &errb
			}
			err := cmd.Run()
			results <- result{p.name, err, out.String(), errb.String()}
		}()
	}
	wg.Wait()
	close(results)
	for r := range results {
		if r.err != nil {
			t.Errorf("pod %s: %v\nstdout:\n%s\nstderr:\n%s", r.name, r.err, r.out, r.log)
		}
		if kill != nil && r.name == kill.pod {
			t.Logf("pod %s after its restart:\n%s%s", r.name, r.out, r.log)
			if !strings.Contains(r.log+r.out, "restored from its state") {
				t.Errorf("pod %s did not resume from its state", r.name)
			}
		}
		if strings.HasPrefix(r.name, "coordinator") && !summaryRE.MatchString(r.out) {
			t.Errorf("coordinator printed no summary:\n%s", r.out)
		}
		if strings.HasPrefix(r.name, "worker") && !strings.Contains(r.out, "trained 50 clocks") {
			t.Errorf("pod %s did not train 50 clocks:\n%s", r.name, r.out)
		}
	}
}

// podKill names the pod runPods kills, and after which output: the
// count-th line that starts with after.
type podKill struct {
	pod, after string
	count      int
}

// lineWatch closes seen at the count-th line written to it that starts
// with prefix.
type lineWatch struct {
	prefix string
	count  int
	mu     sync.Mutex
	buf    []byte
	seen   chan struct{}
	done   bool
}

func (w *lineWatch) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return len(b), nil
	}
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		if strings.HasPrefix(string(w.buf[:i]), w.prefix) {
			if w.count--; w.count > 0 {
				w.buf = w.buf[i+1:]
				continue
			}
			w.done = true
			close(w.seen)
			w.buf = nil
			break
		}
		w.buf = w.buf[i+1:]
	}
	return len(b), nil
}
