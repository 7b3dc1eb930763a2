package etcd

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/falconml/falcon/internal/deploytest"
)

// manifest is what the test reads of cmd/falcon-cluster/deploy/
// jobset-etcd.json: a List of a Service and a JobSet.
type manifest struct {
	Kind  string `json:"kind"`
	Items []struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			// Service
			Selector map[string]string `json:"selector"`
			Ports    []struct {
				Port       int `json:"port"`
				TargetPort int `json:"targetPort"`
			} `json:"ports"`
			// JobSet
			Network struct {
				EnableDNSHostnames bool   `json:"enableDNSHostnames"`
				Subdomain          string `json:"subdomain"`
			} `json:"network"`
			ReplicatedJobs []struct {
				Name     string `json:"name"`
				Template struct {
					Spec struct {
						Completions int `json:"completions"`
						Template    struct {
							Spec struct {
								RestartPolicy string `json:"restartPolicy"`
								Containers    []struct {
									Args  []string `json:"args"`
									Ports []struct {
										ContainerPort int `json:"containerPort"`
									} `json:"ports"`
									ReadinessProbe *struct {
										TCPSocket *struct {
											Port int `json:"port"`
										} `json:"tcpSocket"`
									} `json:"readinessProbe"`
									VolumeMounts []struct {
										MountPath string `json:"mountPath"`
									} `json:"volumeMounts"`
									Env []struct {
										Name      string          `json:"name"`
										Value     string          `json:"value"`
										ValueFrom json.RawMessage `json:"valueFrom"`
									} `json:"env"`
								} `json:"containers"`
							} `json:"spec"`
						} `json:"template"`
					} `json:"spec"`
				} `json:"template"`
			} `json:"replicatedJobs"`
		} `json:"spec"`
	} `json:"items"`
}

// TestDeploy_JobSetEtcd reads cmd/falcon-cluster/deploy/jobset-etcd.json
// (a Service in front of two coordinator pods, a JobSet whose
// coordinator Job runs both, with FALCON_ETCD_ENDPOINTS, and servers and
// workers as in jobset.json) and runs every pod as a process of
// falcon-cluster-etcd with the pod's arguments (after Kubernetes' $(VAR)
// expansion) and environment, except FALCON_ETCD_ENDPOINTS, which names
// the test's etcd instead of the etcd Service. Stand-ins: each pod gets a
// loopback address as POD_IP, and FALCON_HOSTS maps the pods' DNS names
// to them; the Service, which sends connections to the ready coordinator
// pod (the one listening: the leader; its readiness probe checks the
// port), is one more loopback address that both coordinator pods get as
// POD_IP, so that whichever leads binds it. Each emptyDir is a new
// directory. The leading coordinator pod is killed with SIGKILL at its
// second progress line and its command run again (restartPolicy
// OnFailure): the other one takes over within the lease TTL, the run
// finishes, and every process exits 0 (the restarted coordinator once
// the run is over).
func TestDeploy_JobSetEtcd(t *testing.T) {
	endpoint := needEtcd(t)
	if testing.Short() {
		t.Skip("builds the cluster binary and runs processes")
	}
	raw, err := os.ReadFile("../../cmd/falcon-cluster/deploy/jobset-etcd.json")
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if m.Kind != "List" || len(m.Items) != 2 || m.Items[0].Kind != "Service" || m.Items[1].Kind != "JobSet" {
		t.Fatalf("want a List of a Service and a JobSet, got %s of %d items", m.Kind, len(m.Items))
	}
	svc, js := m.Items[0], m.Items[1]
	if svc.Spec.Selector["jobset.sigs.k8s.io/jobset-name"] != js.Metadata.Name || svc.Spec.Selector["jobset.sigs.k8s.io/replicatedjob-name"] != "coordinator" || len(svc.Spec.Ports) != 1 {
		t.Fatalf("Service %s does not select the JobSet's coordinator pods: %v", svc.Metadata.Name, svc.Spec.Selector)
	}
	svcAddr := fmt.Sprintf("%s:%d", svc.Metadata.Name, svc.Spec.Ports[0].Port)
	const secret = "a-test-secret-for-the-manifests"
	subnet := deploytest.PodNet()
	svcIP := subnet + "2"
	type pod struct {
		name string
		args []string
		env  []string
	}
	var pods []pod
	var hosts = []string{svc.Metadata.Name + "=" + svcIP}
	ip := 3
	for _, rj := range js.Spec.ReplicatedJobs {
		spec := rj.Template.Spec
		ctr := spec.Template.Spec.Containers[0]
		coord := rj.Name == "coordinator"
		if !slices.Contains(ctr.Args, "-peers=coordinator="+svcAddr) {
			t.Fatalf("%s: the coordinator's address is not the Service's (%s): %q", rj.Name, svcAddr, ctr.Args)
		}
		if coord {
			if spec.Completions < 2 || spec.Template.Spec.RestartPolicy != "OnFailure" {
				t.Fatalf("coordinator: %d pods, restart %q: want a leader and a standby, restarted", spec.Completions, spec.Template.Spec.RestartPolicy)
			}
			if p := ctr.ReadinessProbe; p == nil || p.TCPSocket == nil || len(ctr.Ports) == 0 || p.TCPSocket.Port != ctr.Ports[0].ContainerPort || svc.Spec.Ports[0].TargetPort != p.TCPSocket.Port {
				t.Fatal("coordinator: no readiness probe on the port the Service targets: the Service would send connections to a standby")
			}
		}
		for idx := range spec.Completions {
			podIP := svcIP
			if !coord {
				podIP = fmt.Sprintf("%s%d", subnet, ip)
				ip++
				hosts = append(hosts, fmt.Sprintf("%s-%s-0-%d.%s=%s", js.Metadata.Name, rj.Name, idx, js.Spec.Network.Subdomain, podIP))
			}
			vars := map[string]string{"JOB_COMPLETION_INDEX": fmt.Sprint(idx)}
			env := []string{"JOB_COMPLETION_INDEX=" + fmt.Sprint(idx)}
			etcdGiven := false
			for _, e := range ctr.Env {
				v := e.Value
				switch {
				case e.Name == "FALCON_ETCD_ENDPOINTS":
					v, etcdGiven = endpoint, true
				case e.ValueFrom == nil:
				case strings.Contains(string(e.ValueFrom), "status.podIP"):
					v = podIP
				case strings.Contains(string(e.ValueFrom), "secretKeyRef"):
					v = secret
				default:
					t.Fatalf("%s: env %s from a source the test does not know", rj.Name, e.Name)
				}
				vars[e.Name] = v
				env = append(env, e.Name+"="+v)
			}
			if coord != etcdGiven {
				t.Fatalf("%s: FALCON_ETCD_ENDPOINTS given: %v", rj.Name, etcdGiven)
			}
			dirs := map[string]string{}
			for _, vm := range ctr.VolumeMounts {
				dirs[vm.MountPath] = t.TempDir()
			}
			var args []string
			for _, a := range ctr.Args {
				a = deploytest.Expand(a, vars)
				for mp, dir := range dirs {
					if k, v, ok := strings.Cut(a, "="); ok && (v == mp || strings.HasPrefix(v, mp+"/")) {
						a = k + "=" + dir + strings.TrimPrefix(v, mp)
					}
				}
				args = append(args, a)
			}
			pods = append(pods, pod{name: fmt.Sprintf("%s-%d", rj.Name, idx), args: args, env: env})
		}
	}
	// a fresh etcd, as the manifest assumes: the test's server lives as
	// long as the test binary, and an earlier run of this test (-count)
	// left the run of the manifest's -run-id marked over
	var runID string
	for _, a := range pods[0].args {
		if v, ok := strings.CutPrefix(a, "-run-id="); ok {
			runID = v
		}
	}
	if runID == "" {
		t.Fatal("the coordinator has no -run-id")
	}
	wipe := newBackend(t, "/falcon/"+runID+"/", "wipe")
	if _, err := wipe.Client().Delete(testCtx(t, slack), wipe.Key(""), clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	bin := buildClusterBinary(t, t.TempDir())
	extra := "FALCON_HOSTS=" + strings.Join(hosts, ",")
	procs := map[string]*proc{}
	var coords []string
	for _, p := range pods {
		procs[p.name] = startProc(t, p.name, bin, append(p.env, extra), p.args...)
		if strings.HasPrefix(p.name, "coordinator") {
			coords = append(coords, p.name)
		}
	}
	// the leader: the coordinator pod that says it leads
	var leader string
	deadline := time.Now().Add(6 * slack)
	for leader == "" {
		for _, n := range coords {
			if procs[n].line(leadingRE) != nil {
				leader = n
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no coordinator pod leads within %v:\n%s", 6*slack, procs[coords[0]].output())
		}
		time.Sleep(20 * time.Millisecond)
	}
	lp := procs[leader]
	progress := regexp.MustCompile(`^coordinator: clock \d+/`)
	for deadline := time.Now().Add(12 * slack); ; {
		n := 0
		lp.mu.Lock()
		for _, l := range lp.out {
			if progress.MatchString(l) {
				n++
			}
		}
		lp.mu.Unlock()
		if n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("leader %s: no second progress line within %v:\n%s", leader, 12*slack, lp.output())
		}
		time.Sleep(20 * time.Millisecond)
	}
	killed := time.Now()
	lp.cmd.Process.Kill()
	var again pod
	for _, p := range pods {
		if p.name == leader {
			again = p
		}
	}
	procs[leader] = startProc(t, leader+"-restarted", bin, append(again.env, extra), again.args...)
	var next string
	for next == "" {
		for _, n := range coords {
			if n != leader && procs[n].line(leadingRE) != nil {
				next = n
			}
		}
		if time.Since(killed) > 10*time.Second+2*slack { // the manifest's TTL
			t.Fatalf("no standby led within %v of the kill", time.Since(killed))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("leader %s killed; %s led %v later (-etcd-ttl from the manifest)", leader, next, time.Since(killed).Round(time.Millisecond))
	for _, p := range pods {
		pr := procs[p.name]
		if err := pr.wait(t, 12*slack); err != nil {
			t.Errorf("pod %s: exit %v:\n%s", pr.name, err, pr.output())
		}
	}
	if !summaryLine.MatchString(procs[next].output()) {
		t.Errorf("the new leader %s printed no summary:\n%s", next, procs[next].output())
	}
	if procs[leader].line(overRE) == nil {
		t.Errorf("the restarted coordinator did not find the run over:\n%s", procs[leader].output())
	}
	for _, p := range pods {
		if strings.HasPrefix(p.name, "worker") && !strings.Contains(procs[p.name].output(), "trained 50 clocks") {
			t.Errorf("pod %s did not train 50 clocks:\n%s", p.name, procs[p.name].output())
		}
	}
}

var summaryLine = regexp.MustCompile(`(?m)^cluster policy=\S+ workers=3 servers=2 clocks=50 `)
