package clusterbin

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/falconml/falcon/ps"
	"github.com/falconml/falcon/transport"
)

// options are the command-line flags. Every flag but the per-node ones
// (perNode) is passed on by the local mode to the children, so all nodes
// agree on the model, data and policy.
type options struct {
	role      string // coordinator, server, worker; "" = local
	rank      int
	listen    string
	advertise string
	peers     string
	peersDNS  string
	hosts     string
	secret    string
	insecure  bool
	tlsCert   string
	tlsKey    string
	tlsCA     string
	nodeCert  string // per-node identity: this node's certificate ({node} = its name)
	nodeKey   string
	nodeCA    string
	child     bool // set by the local mode on its children: exit on stdin EOF
	timeout   time.Duration
	startWait time.Duration
	stateEach time.Duration
	timeline  string
	stateDir  string
	runID     string
	metrics   string        // -metrics-addr
	linger    time.Duration // -metrics-linger
	lease     time.Duration
	lost      string
	ckptEvery int           // -checkpoint-every
	coordDir  string        // -coordinator-dir
	coordWait time.Duration // -coordinator-wait
	det       bool          // -deterministic

	policy     string
	staleness  int
	compress   string
	codec      string
	bandwidth  float64
	dataset    string
	pad        int
	modelName  string
	hidden     int
	trainRows  int
	testRows   int
	clocks     int
	batch      int
	workers    int
	servers    int
	par        int
	cores      int
	tick       time.Duration
	lr         float64
	keyLen     int
	slow       string
	sampleTime time.Duration
	evalEvery  int
	seed       uint64

	ext *Extension // what the binary adds (nil: nothing)
}

// perNode are the flags the local mode does not forward to its children.
var perNode = map[string]bool{
	"role": true, "rank": true, "listen": true, "advertise": true, "peers": true, "peers-dns": true, "hosts": true,
	"secret": true, "insecure": true, "child": true, "tls-cert": true, "tls-key": true, "tls-ca": true, "timeline": true,
	"metrics-addr": true,
}

// envFlags are the environment variables read for flags not given on the
// command line (a Kubernetes manifest sets either).
var envFlags = map[string]string{
	"role": "FALCON_ROLE", "rank": "FALCON_RANK", "listen": "FALCON_LISTEN", "advertise": "FALCON_ADVERTISE",
	"peers": "FALCON_PEERS", "peers-dns": "FALCON_PEERS_DNS", "hosts": "FALCON_HOSTS", "secret": "FALCON_SECRET",
	"node-cert": "FALCON_NODE_CERT", "node-key": "FALCON_NODE_KEY", "node-ca": "FALCON_NODE_CA",
	"metrics-addr": "FALCON_METRICS_ADDR",
	"lease":        "FALCON_LEASE", "lost-worker": "FALCON_LOST_WORKER",
	"state-dir": "FALCON_STATE_DIR", "run-id": "FALCON_RUN_ID", "checkpoint-every": "FALCON_CHECKPOINT_EVERY",
	"coordinator-dir": "FALCON_COORDINATOR_DIR", "coordinator-wait": "FALCON_COORDINATOR_WAIT",
	"deterministic": "FALCON_DETERMINISTIC",
}

func newFlagSet(o *options, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&o.role, "role", "", "coordinator, server or worker ($FALCON_ROLE); empty runs the whole cluster locally")
	fs.IntVar(&o.rank, "rank", 0, "this node's index among its role ($FALCON_RANK, else $JOB_COMPLETION_INDEX)")
	fs.StringVar(&o.listen, "listen", "", "address to bind ($FALCON_LISTEN; default: all interfaces at the port of this node's address in the peer list)")
	fs.StringVar(&o.advertise, "advertise", "", "address the peers dial for this node ($FALCON_ADVERTISE; default: its entry in -peers / -peers-dns)")
	fs.StringVar(&o.peers, "peers", "", "static address book: name=host:port,... ($FALCON_PEERS); with -peers-dns, its entries replace the template's (e.g. coordinator=<a Service>:7000)")
	fs.StringVar(&o.peersDNS, "peers-dns", "", "address template with {role} and {rank}, e.g. falcon-{role}-0-{rank}.falcon:7000 ($FALCON_PEERS_DNS)")
	fs.StringVar(&o.hosts, "hosts", "", "static hosts table for peer hostnames: name=ip,... ($FALCON_HOSTS), where there is no DNS")
	fs.StringVar(&o.secret, "secret", "", "shared secret for the TCP handshake ($FALCON_SECRET; the local mode makes a random one)")
	fs.BoolVar(&o.insecure, "insecure", false, "allow a role to listen beyond loopback with neither a secret nor TLS")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "PEM certificate of this node (enables TLS with -tls-key and -tls-ca)")
	fs.StringVar(&o.tlsKey, "tls-key", "", "PEM private key of -tls-cert")
	fs.StringVar(&o.tlsCA, "tls-ca", "", "PEM CA bundle that signs every node's certificate (mutual TLS)")
	fs.StringVar(&o.nodeCert, "node-cert", "", "PEM certificate of this node naming it as a DNS SAN ($FALCON_NODE_CERT; {node} is replaced by the node's name): mutual TLS with per-node identity, roles enforced")
	fs.StringVar(&o.nodeKey, "node-key", "", "PEM private key of -node-cert ($FALCON_NODE_KEY; {node} is replaced)")
	fs.StringVar(&o.nodeCA, "node-ca", "", "PEM CA bundle that issues every node's -node-cert ($FALCON_NODE_CA)")
	fs.BoolVar(&o.child, "child", false, "internal, set by the local mode: exit when stdin closes")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "give up (non-zero exit) if the run takes longer than this")
	fs.DurationVar(&o.startWait, "start-timeout", 15*time.Second, "how long each role waits for its peers at start-up before naming the missing ones")
	fs.DurationVar(&o.stateEach, "state-every", 0, "coordinator: print every worker's state (clock, speed, parallelism, straggler/pioneer) at this interval; 0 never")
	fs.StringVar(&o.stateDir, "state-dir", "", "server: keep a checkpoint (every -checkpoint-every flushes) and a request log in this directory, and resume from them at start ($FALCON_STATE_DIR); needs -run-id")
	fs.IntVar(&o.ckptEvery, "checkpoint-every", 10, "server with -state-dir: checkpoint every this many flushes ($FALCON_CHECKPOINT_EVERY); the request log covers the flushes between")
	fs.StringVar(&o.runID, "run-id", "", "the run's name, the same on every node ($FALCON_RUN_ID): a server resumes only the -state-dir checkpoints of this run and refuses an earlier run's; a coordinator resumes only its -coordinator-dir state of this run")
	fs.StringVar(&o.coordDir, "coordinator-dir", "", "coordinator: keep its state (clocks, membership, the push ledger, the policy's inputs) in <dir>/<run-id>/ and resume the run from it when restarted ($FALCON_COORDINATOR_DIR); needs -run-id")
	fs.DurationVar(&o.coordWait, "coordinator-wait", 0, "how long workers and servers wait for a coordinator that stopped answering before they exit naming it ($FALCON_COORDINATOR_WAIT); 0: what the coordinator asks (60s with -coordinator-dir, else none); on the coordinator, what it asks")
	fs.BoolVar(&o.det, "deterministic", false, "servers sum a clock's pushes in worker order (ps.StoreConfig.Deterministic; $FALCON_DETERMINISTIC): a BSP run, interrupted by a server or coordinator restart or not, ends with bit-identical parameters, for a buffer per worker and clock; with -lost-worker continue, a lost worker's push that reached some servers only is dropped from all")
	fs.StringVar(&o.metrics, "metrics-addr", "", "serve Prometheus metrics at http://<this address>/metrics ($FALCON_METRICS_ADDR), e.g. :9100; the local mode gives its k-th process port+k (or its own with port 0)")
	fs.DurationVar(&o.linger, "metrics-linger", 0, "keep serving -metrics-addr this long after the run ends, so a last scrape sees the final values")
	fs.DurationVar(&o.lease, "lease", 10*time.Second, "coordinator: a worker or server silent this long (or a worker cut off from a server this long) is lost ($FALCON_LEASE); workers heartbeat every min(500ms, lease/8)")
	fs.StringVar(&o.lost, "lost-worker", "abort", "coordinator: what a lost worker does to the run ($FALCON_LOST_WORKER): abort (every node exits 1 naming it) or continue (its unprocessed samples of its clock go to a survivor and the run goes on without it)")
	fs.StringVar(&o.timeline, "timeline", "", "write this process's timeline (Chrome trace-event JSON) to this file; the local mode writes one per node, <name>-<node>.json")

	fs.StringVar(&o.policy, "policy", "bsp", "sync policy: "+strings.Join(policyNames(), ", "))
	fs.IntVar(&o.staleness, "staleness", 3, "staleness bound s of ssp and epsp-slack")
	fs.StringVar(&o.compress, "compress", "never", "message compression: never, always (-codec) or auto (fvdf's live policy)")
	fs.StringVar(&o.codec, "codec", "lz4", "codec of -compress always: lz4 or snappy")
	fs.Float64Var(&o.bandwidth, "bandwidth", 0, "link bandwidth in bytes/s that -compress auto assumes; 0 means fvdf's default (1 Gbit/s)")
	fs.StringVar(&o.dataset, "dataset", "synthetic", "synthetic (seeded Gaussian clusters), sparse (the same with -pad always-zero features: sparse gradients) or mnist (the GoMNIST module's files)")
	fs.IntVar(&o.pad, "pad", 4000, "always-zero features appended by -dataset sparse")
	fs.StringVar(&o.modelName, "model", "softmax", "softmax or mlp")
	fs.IntVar(&o.hidden, "hidden", 64, "hidden units of -model mlp")
	fs.IntVar(&o.trainRows, "train", 10000, "training rows (a seeded sample; synthetic generates this many)")
	fs.IntVar(&o.testRows, "test", 2000, "test rows the coordinator evaluates on")
	fs.IntVar(&o.clocks, "clocks", 50, "clocks (iterations) per worker")
	fs.IntVar(&o.batch, "batch", 32, "initial batch size per worker per clock")
	fs.IntVar(&o.workers, "workers", 3, "number of workers")
	fs.IntVar(&o.servers, "servers", 2, "number of servers")
	fs.IntVar(&o.par, "parallelism", 1, "initial compute goroutines per worker")
	fs.IntVar(&o.cores, "cores", 2, "cores per worker host that elastic parallelism (epsp-*) may use")
	fs.DurationVar(&o.tick, "tick", 100*time.Millisecond, "coordinator control tick (projection, parallelism, transfers)")
	fs.Float64Var(&o.lr, "lr", 0.5, "server-side SGD learning rate")
	fs.IntVar(&o.keyLen, "key-len", 0, "parameters per key; 0 cuts the model into 4 keys per server (at most 1024 values each)")
	fs.StringVar(&o.slow, "slow", "", "injected slowdowns on the wall clock: worker=factor,... e.g. worker-2=4 (or 2=4)")
	fs.DurationVar(&o.sampleTime, "sample-time", 0, "extra compute time per sample on the wall clock, to emulate a bigger model (multiplied by -slow)")
	fs.IntVar(&o.evalEvery, "eval-every", 0, "coordinator evaluates every this many clocks; 0 means clocks/10")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of data, data order and initial parameters")
	return fs
}

// parseArgs parses args, then fills every flag not given from its
// environment variable (lookup), and the rank from JOB_COMPLETION_INDEX
// when neither -rank nor FALCON_RANK is set.
func parseArgs(args []string, lookup func(string) (string, bool), out io.Writer) (*options, *flag.FlagSet, error) {
	return parseArgsExt(args, lookup, out, nil)
}

// parseArgsExt is parseArgs with ext's flags and checks added.
func parseArgsExt(args []string, lookup func(string) (string, bool), out io.Writer, ext *Extension) (*options, *flag.FlagSet, error) {
	o := &options{ext: ext}
	fs := newFlagSet(o, out)
	envs := envFlags
	if ext != nil && ext.Flags != nil {
		envs = maps.Clone(envFlags)
		for name, env := range ext.Flags(fs) {
			envs[name] = env
		}
	}
	if err := fs.Parse(args); err != nil {
		return nil, nil, err
	}
	if fs.NArg() > 0 {
		return nil, nil, fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for name, env := range envs {
		if v, ok := lookup(env); ok && v != "" && !set[name] {
			if err := fs.Set(name, v); err != nil {
				return nil, nil, fmt.Errorf("%w: $%s: %v", errUsage, env, err)
			}
			set[name] = true
		}
	}
	if v, ok := lookup("JOB_COMPLETION_INDEX"); ok && v != "" && !set["rank"] {
		r, err := strconv.Atoi(v)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: $JOB_COMPLETION_INDEX %q", errUsage, v)
		}
		o.rank = r
	}
	if err := o.validate(); err != nil {
		return nil, nil, err
	}
	if ext != nil && ext.Check != nil {
		if err := ext.Check(o.settings(nil)); err != nil {
			return nil, nil, fmt.Errorf("%w: %v", errUsage, err)
		}
	}
	return o, fs, nil
}

// Main runs the cluster binary with the process's arguments and
// environment and exits with Run's status: 0, 1 (the run or the node
// failed) or 2 (bad flags). ext adds to it (nil: the plain binary,
// cmd/falcon-cluster).
func Main(ext *Extension) {
	os.Exit(Run(os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr, ext))
}

// Run runs the cluster binary with args (without the program's name),
// reading the environment through lookup, and returns its exit status:
// 0 when the run (or the node) ended well, 1 when it failed, 2 for bad
// flags; errors are written to stderr. With no -role it starts the
// whole cluster as child processes of os.Executable().
func Run(args []string, lookup func(string) (string, bool), stdout, stderr io.Writer, ext *Extension) int {
	o, fs, err := parseArgsExt(args, lookup, stderr, ext)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "cluster: %v\n", err)
		return 2
	}
	if w := o.trustWarning(); w != "" && !o.child { // the local mode's parent warns for its children
		fmt.Fprintf(stderr, "cluster: warning: %s\n", w)
	}
	if o.role == "" {
		exe, eerr := os.Executable()
		if eerr != nil {
			fmt.Fprintf(stderr, "cluster: %v\n", eerr)
			return 1
		}
		err = runLocal(context.Background(), localConfig{
			exe: exe, args: forwardArgs(fs), secret: o.secret, timeout: o.timeout,
			workers: o.workers, servers: o.servers, tls: o.tlsArgs(), timeline: o.timeline, metricsAddr: o.metrics,
			stdout: stdout, stderr: stderr,
		})
	} else {
		err = runRole(o, stdout)
	}
	if err != nil {
		name := "local"
		if o.role != "" {
			name = string(o.nodeName())
		}
		fmt.Fprintf(stderr, "cluster: %s: %v\n", name, err)
		return 1
	}
	return 0
}

// forwardArgs returns the flags set on the command line that every child
// must see as well.
func forwardArgs(fs *flag.FlagSet) []string {
	var args []string
	fs.Visit(func(f *flag.Flag) {
		if !perNode[f.Name] {
			args = append(args, "-"+f.Name+"="+f.Value.String())
		}
	})
	return args
}

// tlsArgs are the TLS flags, forwarded to every child as they are (all
// nodes share one certificate in the local mode).
func (o *options) tlsArgs() []string {
	if o.tlsCert == "" {
		return nil
	}
	return []string{"-tls-cert=" + o.tlsCert, "-tls-key=" + o.tlsKey, "-tls-ca=" + o.tlsCA}
}

var errUsage = errors.New("bad flags")

func (o *options) validate() error {
	switch o.role {
	case "", "coordinator", "server", "worker":
	default:
		return fmt.Errorf("%w: -role %q (want coordinator, server or worker)", errUsage, o.role)
	}
	if _, err := newPolicy(o); err != nil {
		return err
	}
	switch o.compress {
	case "never", "always", "auto":
	default:
		return fmt.Errorf("%w: -compress %q (want never, always or auto)", errUsage, o.compress)
	}
	if o.codec != "lz4" && o.codec != "snappy" {
		return fmt.Errorf("%w: -codec %q (want lz4 or snappy)", errUsage, o.codec)
	}
	if o.dataset != "synthetic" && o.dataset != "sparse" && o.dataset != "mnist" {
		return fmt.Errorf("%w: -dataset %q (want synthetic, sparse or mnist)", errUsage, o.dataset)
	}
	if o.pad < 0 {
		return fmt.Errorf("%w: -pad %d", errUsage, o.pad)
	}
	if o.lease <= 0 {
		return fmt.Errorf("%w: -lease %v must be positive", errUsage, o.lease)
	}
	if _, err := o.lostAction(); err != nil {
		return err
	}
	if (o.stateDir != "" || o.coordDir != "") && o.runID == "" {
		return fmt.Errorf("%w: -state-dir and -coordinator-dir need -run-id, the same on every node (a new name starts a new run; the old name resumes it)", errUsage)
	}
	if o.ckptEvery < 1 {
		return fmt.Errorf("%w: -checkpoint-every %d must be positive", errUsage, o.ckptEvery)
	}
	if o.runID != "" && (strings.ContainsAny(o.runID, `/\`) || o.runID == "." || o.runID == "..") {
		return fmt.Errorf("%w: -run-id %q names a directory of -coordinator-dir: no path separators", errUsage, o.runID)
	}
	if o.modelName != "softmax" && o.modelName != "mlp" {
		return fmt.Errorf("%w: -model %q (want softmax or mlp)", errUsage, o.modelName)
	}
	if o.workers < 1 || o.servers < 1 || o.clocks < 1 || o.batch < 1 || o.par < 1 || o.cores < 1 {
		return fmt.Errorf("%w: -workers, -servers, -clocks, -batch, -parallelism and -cores must be positive", errUsage)
	}
	if o.trainRows < o.workers || o.testRows < 1 {
		return fmt.Errorf("%w: -train must be at least -workers and -test positive", errUsage)
	}
	if o.lr <= 0 || o.keyLen < 0 || o.hidden < 1 || o.sampleTime < 0 || o.evalEvery < 0 || o.timeout <= 0 || o.startWait <= 0 || o.stateEach < 0 {
		return fmt.Errorf("%w: -lr, -hidden, -timeout and -start-timeout must be positive; -key-len, -sample-time, -eval-every, -state-every not negative", errUsage)
	}
	if (o.tlsCert == "") != (o.tlsKey == "") || (o.tlsCert == "") != (o.tlsCA == "") {
		return fmt.Errorf("%w: -tls-cert, -tls-key and -tls-ca go together", errUsage)
	}
	if (o.nodeCert == "") != (o.nodeKey == "") || (o.nodeCert == "") != (o.nodeCA == "") {
		return fmt.Errorf("%w: -node-cert, -node-key and -node-ca go together", errUsage)
	}
	if o.nodeCert != "" && o.tlsCert != "" {
		return fmt.Errorf("%w: give either -node-cert (a certificate per node) or -tls-cert (one for all), not both", errUsage)
	}
	if _, err := parseSlow(o.slow, o.workers); err != nil {
		return err
	}
	if o.role != "" {
		if _, _, err := o.book(); err != nil {
			return err
		}
	}
	return nil
}

// lostAction is -lost-worker's ps.LostAction.
func (o *options) lostAction() (ps.LostAction, error) {
	switch o.lost {
	case "abort":
		return ps.AbortRun, nil
	case "continue":
		return ps.ContinueWithout, nil
	}
	return 0, fmt.Errorf("%w: -lost-worker %q (want abort or continue)", errUsage, o.lost)
}

// trustWarning is the warning a run without per-node identity prints
// once: its role checks hold against strangers at best, not members.
func (o *options) trustWarning() string {
	switch {
	case o.nodeCert != "":
		return ""
	case o.secret != "" || o.tlsCert != "" || o.role == "": // the local mode makes a secret
		return "roles are not enforced: the shared secret (and a TLS certificate shared by all nodes) proves membership only, so any node holding it can claim any role (a worker could flush as the coordinator); give each node its own certificate with -node-cert, -node-key and -node-ca"
	}
	return "roles are not enforced: with neither a secret nor certificates every peer's name is taken on trust"
}

// identityFiles are this node's -node-* files, {node} expanded.
func (o *options) identityFiles(node string) transport.IdentityFiles {
	x := func(s string) string { return strings.ReplaceAll(s, "{node}", node) }
	return transport.IdentityFiles{CA: x(o.nodeCA), Cert: x(o.nodeCert), Key: x(o.nodeKey)}
}

// nodeName is this node's name from -role and -rank.
func (o *options) nodeName() string {
	switch o.role {
	case "server":
		return fmt.Sprintf("server-%d", o.rank)
	case "worker":
		return fmt.Sprintf("worker-%d", o.rank)
	}
	return o.role
}
