// Command cluster runs a Falcon parameter-server cluster as separate OS
// processes talking over real TCP: one coordinator, -servers servers and
// -workers workers, each a role of this one binary.
//
// With no -role (or with -local) it starts the whole cluster on 127.0.0.1
// as child processes of itself, hands them an address book and a random
// shared secret, streams their prefixed output and exits non-zero if any of
// them fails or the run exceeds -timeout. With -role it runs one role, for
// deployments on several hosts with a static address book (-peers).
//
// See README.md for the commands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// options are the command-line flags. Every flag but the per-process ones
// (role, id, listen, peers, local, child, secret, tls-*) is passed on by
// -local to the children, so all roles agree on the model, data and policy.
type options struct {
	role      string // coordinator, server, worker; "" = local
	id        string
	listen    string
	peers     string
	secret    string
	tlsCert   string
	tlsKey    string
	tlsCA     string
	local     bool
	child     bool // set by -local on its children: address book on stdin, exit on stdin EOF
	timeout   time.Duration
	startWait time.Duration

	policy     string
	staleness  int
	compress   string
	codec      string
	bandwidth  float64
	dataset    string
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
}

// perProcess are the flags -local does not forward to its children.
var perProcess = map[string]bool{
	"role": true, "id": true, "listen": true, "peers": true, "secret": true,
	"local": true, "child": true, "tls-cert": true, "tls-key": true, "tls-ca": true,
}

func newFlagSet(o *options, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&o.role, "role", "", "coordinator, server or worker; empty runs the whole cluster locally (-local)")
	fs.StringVar(&o.id, "id", "", "this node's name: coordinator, server-<i> or worker-<i> (default: the role's name, index 0)")
	fs.StringVar(&o.listen, "listen", "127.0.0.1:0", "address to listen on (use host:port reachable by the peers on several hosts)")
	fs.StringVar(&o.peers, "peers", "", "static address book: name=host:port,... (every other node this one talks to)")
	fs.StringVar(&o.secret, "secret", "", "shared secret for the TCP handshake (default $FALCON_SECRET; -local makes a random one)")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "PEM certificate of this node (enables TLS with -tls-key and -tls-ca)")
	fs.StringVar(&o.tlsKey, "tls-key", "", "PEM private key of -tls-cert")
	fs.StringVar(&o.tlsCA, "tls-ca", "", "PEM CA bundle that signs every node's certificate (mutual TLS)")
	fs.BoolVar(&o.local, "local", false, "start the whole cluster as child processes on 127.0.0.1 (the default without -role)")
	fs.BoolVar(&o.child, "child", false, "internal, set by -local: read the address book from stdin and exit when stdin closes")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "give up (non-zero exit) if the run takes longer than this")
	fs.DurationVar(&o.startWait, "start-timeout", 15*time.Second, "how long each role waits for its peers at start-up before naming the missing ones")

	fs.StringVar(&o.policy, "policy", "bsp", "sync policy: "+strings.Join(policyNames(), ", "))
	fs.IntVar(&o.staleness, "staleness", 3, "staleness bound s of ssp and epsp-slack")
	fs.StringVar(&o.compress, "compress", "never", "message compression: never, always (-codec) or auto (fvdf's live policy)")
	fs.StringVar(&o.codec, "codec", "lz4", "codec of -compress always: lz4 or snappy")
	fs.Float64Var(&o.bandwidth, "bandwidth", 0, "link bandwidth in bytes/s that -compress auto assumes; 0 means fvdf's default (1 Gbit/s)")
	fs.StringVar(&o.dataset, "dataset", "synthetic", "synthetic (seeded Gaussian clusters) or mnist (the GoMNIST module's files)")
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

func main() {
	var o options
	fs := newFlagSet(&o, os.Stderr)
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "cluster: unexpected arguments %q\n", fs.Args())
		os.Exit(2)
	}
	if err := o.validate(); err != nil {
		fmt.Fprintf(os.Stderr, "cluster: %v\n", err)
		os.Exit(2)
	}
	if o.secret == "" {
		o.secret = os.Getenv("FALCON_SECRET")
	}
	var err error
	if o.role == "" || o.local {
		exe, eerr := os.Executable()
		if eerr != nil {
			fmt.Fprintf(os.Stderr, "cluster: %v\n", eerr)
			os.Exit(1)
		}
		err = runLocal(context.Background(), localConfig{
			exe: exe, args: forwardArgs(fs), secret: o.secret, timeout: o.timeout,
			workers: o.workers, servers: o.servers, tls: o.tlsArgs(),
			stdout: os.Stdout, stderr: os.Stderr,
		})
	} else {
		err = runRole(o)
	}
	if err != nil {
		name := "local"
		if o.role != "" && !o.local {
			name = o.nodeName()
		}
		fmt.Fprintf(os.Stderr, "cluster: %s: %v\n", name, err)
		os.Exit(1)
	}
}

// forwardArgs returns the flags set on the command line that every child
// must see as well.
func forwardArgs(fs *flag.FlagSet) []string {
	var args []string
	fs.Visit(func(f *flag.Flag) {
		if !perProcess[f.Name] {
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
	if o.dataset != "synthetic" && o.dataset != "mnist" {
		return fmt.Errorf("%w: -dataset %q (want synthetic or mnist)", errUsage, o.dataset)
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
	if o.lr <= 0 || o.keyLen < 0 || o.hidden < 1 || o.sampleTime < 0 || o.evalEvery < 0 || o.timeout <= 0 || o.startWait <= 0 {
		return fmt.Errorf("%w: -lr, -hidden, -timeout and -start-timeout must be positive; -key-len, -sample-time, -eval-every not negative", errUsage)
	}
	if (o.tlsCert == "") != (o.tlsKey == "") || (o.tlsCert == "") != (o.tlsCA == "") {
		return fmt.Errorf("%w: -tls-cert, -tls-key and -tls-ca go together", errUsage)
	}
	if _, err := parseSlow(o.slow, o.workers); err != nil {
		return err
	}
	if o.role != "" && !o.local {
		if _, _, err := o.parseID(); err != nil {
			return err
		}
		if _, err := parsePeers(o.peers); err != nil {
			return err
		}
	}
	return nil
}
