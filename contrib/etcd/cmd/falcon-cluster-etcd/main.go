// Command falcon-cluster-etcd is cmd/falcon-cluster (the same flags,
// environment variables and roles) with a standby coordinator on etcd:
// given -etcd-endpoints, a process of the coordinator role campaigns for
// the leadership of its run in etcd (contrib/etcd's RunStandby), and only
// once it leads does it bind its address and run the coordinator, with
// its state in etcd (a fenced etcd.Store) instead of -coordinator-dir.
// Start two or more coordinator processes: when the leader dies, a
// standby takes over within the lease TTL (-etcd-ttl) and resumes the
// run from the state in etcd; a leader that loses its lease stops as a
// crash would and stands by again. Once the run is over the leader marks
// it so in etcd, and each standby, leading in turn, exits (0 when the run
// finished, 1 when it failed). Servers and workers run as in
// cmd/falcon-cluster (their -etcd-* flags are unused).
//
// Addressing: the workers and servers dial the coordinator at one
// address (its entry in -peers or -peers-dns). A standby binds it only
// once it leads: on one host, give every coordinator process the same
// -listen (the port is free once the leader is dead); across hosts, put
// the coordinator processes behind one stable address (a Kubernetes
// Service selecting them, with a readiness probe on the port: only the
// leader listens, so only it is ready).
//
// See contrib/etcd/README.md.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/falconml/falcon/contrib/etcd"
	"github.com/falconml/falcon/internal/clusterbin"
	"github.com/falconml/falcon/ps"
	"go.uber.org/zap"
)

func main() { clusterbin.Main(extension(&flags{})) }

// flags are the -etcd-* flags.
type flags struct {
	endpoints string
	prefix    string
	ttl       time.Duration
	cert, key string
	ca        string
	user      string
	password  string
}

// extension returns the cluster binary's extension that reads f's flags.
func extension(f *flags) *clusterbin.Extension {
	return &clusterbin.Extension{
		Flags: func(fs *flag.FlagSet) map[string]string {
			fs.StringVar(&f.endpoints, "etcd-endpoints", "", "coordinator: etcd's client URLs, comma-separated ($FALCON_ETCD_ENDPOINTS): the coordinator stands by for the leadership and keeps its state in etcd; needs -run-id, excludes -coordinator-dir")
			fs.StringVar(&f.prefix, "etcd-prefix", "", "etcd key prefix of this run ($FALCON_ETCD_PREFIX), beginning and ending with /; empty means /falcon/<run-id>/")
			fs.DurationVar(&f.ttl, "etcd-ttl", 10*time.Second, "lease TTL in whole seconds ($FALCON_ETCD_TTL): a dead leader is replaced within about this plus 1 s; a leader cut off from etcd stops within it")
			fs.StringVar(&f.cert, "etcd-cert", "", "PEM client certificate for etcd ($FALCON_ETCD_CERT; with -etcd-key)")
			fs.StringVar(&f.key, "etcd-key", "", "PEM private key of -etcd-cert ($FALCON_ETCD_KEY)")
			fs.StringVar(&f.ca, "etcd-ca", "", "PEM CA bundle that signs etcd's server certificate ($FALCON_ETCD_CA): TLS to etcd")
			fs.StringVar(&f.user, "etcd-user", "", "etcd user when etcd's auth is on ($FALCON_ETCD_USER)")
			fs.StringVar(&f.password, "etcd-password", "", "password of -etcd-user ($FALCON_ETCD_PASSWORD: prefer the environment, a flag shows in ps)")
			return map[string]string{
				"etcd-endpoints": "FALCON_ETCD_ENDPOINTS", "etcd-prefix": "FALCON_ETCD_PREFIX", "etcd-ttl": "FALCON_ETCD_TTL",
				"etcd-cert": "FALCON_ETCD_CERT", "etcd-key": "FALCON_ETCD_KEY", "etcd-ca": "FALCON_ETCD_CA",
				"etcd-user": "FALCON_ETCD_USER", "etcd-password": "FALCON_ETCD_PASSWORD",
			}
		},
		Check: func(s clusterbin.Settings) error {
			if f.endpoints == "" {
				return nil
			}
			_, err := f.config(s)
			return err
		},
		Coordinator: func(ctx context.Context, s clusterbin.Settings, run clusterbin.CoordinatorFunc) error {
			if f.endpoints == "" {
				return run(ctx, nil) // as cmd/falcon-cluster
			}
			cfg, err := f.config(s)
			if err != nil {
				return err
			}
			return standby(ctx, cfg, s, run)
		},
	}
}

// config is the etcd.Config of the flags, checked.
func (f *flags) config(s clusterbin.Settings) (etcd.Config, error) {
	cfg := etcd.DefaultConfig()
	if s.RunID == "" {
		return cfg, errors.New("-etcd-endpoints needs -run-id, the same on every node (it names the run's state in etcd)")
	}
	if s.CoordinatorDir != "" {
		return cfg, errors.New("give either -etcd-endpoints or -coordinator-dir: the coordinator's state is in one place")
	}
	for _, e := range strings.Split(f.endpoints, ",") {
		cfg.Endpoints = append(cfg.Endpoints, strings.TrimSpace(e))
	}
	cfg.Prefix = f.prefix
	if cfg.Prefix == "" {
		cfg.Prefix = "/falcon/" + s.RunID + "/"
	}
	cfg.TTL = f.ttl
	if f.ttl <= 0 {
		return cfg, fmt.Errorf("-etcd-ttl %v must be positive", f.ttl)
	}
	cfg.Username, cfg.Password = f.user, f.password
	if (f.cert == "") != (f.key == "") {
		return cfg, errors.New("-etcd-cert and -etcd-key go together")
	}
	if f.ca != "" || f.cert != "" {
		t, err := f.tls()
		if err != nil {
			return cfg, err
		}
		cfg.TLS = t
	}
	if err := cfg.Validate(); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// tls is the TLS configuration of -etcd-ca, -etcd-cert and -etcd-key.
func (f *flags) tls() (*tls.Config, error) {
	t := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.ca != "" {
		pem, err := os.ReadFile(f.ca)
		if err != nil {
			return nil, fmt.Errorf("-etcd-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-etcd-ca %s: no PEM certificate in it", f.ca)
		}
		t.RootCAs = pool
	}
	if f.cert != "" {
		c, err := tls.LoadX509KeyPair(f.cert, f.key)
		if err != nil {
			return nil, fmt.Errorf("-etcd-cert/-etcd-key: %w", err)
		}
		t.Certificates = []tls.Certificate{c}
	}
	return t, nil
}

// standby runs the coordinator role as a standby on etcd: it campaigns;
// once it leads, it runs the coordinator with the state in etcd; when it
// loses the leadership (its coordinator stopped as a crash would), it
// stands by again, until the run ends (run returns), fails, or ctx is
// done.
func standby(ctx context.Context, cfg etcd.Config, s clusterbin.Settings, run clusterbin.CoordinatorFunc) error {
	cfg.Logger = zap.NewNop() // the client's retries are expected; what matters is said below
	b, err := etcd.Open(cfg)
	if err != nil {
		return err
	}
	defer b.Close()
	bc := b.Config()
	for {
		fmt.Fprintf(s.Out, "coordinator: standing by for the leadership of %scoordinator in etcd (%s, TTL %v) as %s\n",
			bc.Prefix, strings.Join(bc.Endpoints, ","), bc.TTL, bc.Name)
		err := etcd.RunStandby(ctx, b.Election("coordinator"), etcd.DefaultStateName, func(ctx context.Context, st *etcd.Store, state []byte) error {
			l := st.Leadership()
			if kv, ok, err := l.Get(ctx, doneKey); err != nil {
				return err
			} else if ok {
				if string(kv.Value) == "finished" {
					return errRunFinished
				}
				return fmt.Errorf("the run is over: %s (under an earlier coordinator)", kv.Value)
			}
			how := "a new run"
			if state != nil {
				how = fmt.Sprintf("resuming from %d bytes of state", len(state))
			}
			fmt.Fprintf(s.Out, "coordinator: leading (lease %x, fencing token %d): %s\n", int64(l.Session().ID()), l.Rev(), how)
			err := runBound(ctx, s, bc.StopTimeout, func() error { return run(ctx, st) })
			if ctx.Err() != nil || errors.Is(err, ps.ErrSuperseded) {
				return err // deposed (or stopped): the run is not over
			}
			// the run is over, well or not: the standbys, which lead
			// once this process resigns, exit instead of resuming it
			outcome := "finished"
			if err != nil {
				outcome = "failed: " + err.Error()
			}
			if perr := markOver(ctx, l, outcome); perr != nil {
				return errors.Join(err, fmt.Errorf("marking the run over in etcd: %w", perr))
			}
			return err
		})
		if errors.Is(err, errRunFinished) {
			fmt.Fprintf(s.Out, "coordinator: the run is over (another coordinator finished it); exiting\n")
			return nil
		}
		if !errors.Is(err, etcd.ErrNotLeader) || ctx.Err() != nil {
			return err
		}
		if errors.Is(err, etcd.ErrStopTimeout) {
			return err // the coordinator did not stop: exit, a supervisor starts a fresh process
		}
		fmt.Fprintf(s.Out, "coordinator: lost the leadership (%v); standing by again\n", err)
	}
}

// runBound runs run, and again while it fails because the coordinator's
// address is still bound, for at most wait (Config.StopTimeout, the time
// a deposed leader has to stop): a leader that gave its leadership up
// (its lease revoked, the store giving up on etcd) lets a standby lead at
// once, while its own process may still be closing its listener.
func runBound(ctx context.Context, s clusterbin.Settings, wait time.Duration, run func() error) error {
	deadline := time.Now().Add(wait)
	for {
		err := run()
		if !errors.Is(err, syscall.EADDRINUSE) || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		fmt.Fprintf(s.Out, "coordinator: the address is still bound (the last leader stopping): %v; trying again\n", err)
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// markOver writes doneKey while l holds, retrying a failed write every
// 200 ms for at most the lease TTL (etcd electing a leader, say); a
// refused one (leadership lost) is not retried.
func markOver(ctx context.Context, l *etcd.Leadership, outcome string) error {
	deadline := time.Now().Add(l.Session().TTL())
	for {
		err := l.Put(ctx, doneKey, []byte(outcome))
		if err == nil || errors.Is(err, etcd.ErrNotLeader) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// doneKey, under the run's prefix, says that the run is over and how
// ("finished" or "failed: ..."): written (fenced) by the leader whose
// coordinator ended the run, read by each standby once it leads.
const doneKey = "coordinator/done"

// errRunFinished: a standby won the leadership of a run that finished.
var errRunFinished = errors.New("the run is over: it finished")
