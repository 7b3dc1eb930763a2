package clusterbin

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/falconml/falcon/ps"
	"github.com/falconml/falcon/transport"
)

// localConfig says how runLocal starts a cluster of child processes.
type localConfig struct {
	exe  string   // the binary to run (normally os.Executable())
	args []string // flags every child gets
	tls  []string // TLS flags every child gets
	// secret is the shared secret; empty means a random one for this run.
	secret string
	// secretFor overrides the secret of single nodes (to show that a node
	// with the wrong secret cannot join).
	secretFor        map[transport.NodeID]string
	timeout          time.Duration
	workers, servers int
	// timeline, if set, has the coordinator and each worker write its
	// timeline to <timeline without .json>-<node>.json.
	timeline string
	// metricsAddr, if set, has each child serve its metrics
	// (childMetricsAddr).
	metricsAddr    string
	stdout, stderr io.Writer
	// tookAddrs, if set, sees each attempt's address book before the
	// children start (a test takes a port there).
	tookAddrs func(attempt int, addrs map[transport.NodeID]string)
}

// errChildFailed wraps the error of a run in which a child failed.
var errChildFailed = errors.New("child failed")

// errPortTaken wraps, with errChildFailed, the error of a run in which a
// child could not bind the port chosen for it: another process took it
// between loopbackAddrs' release and the child's listen.
var errPortTaken = errors.New("a node's port was taken before it could bind it")

// localAttempts bounds the starts of a local run whose port was taken.
const localAttempts = 3

// child is one node's process.
type child struct {
	name   transport.NodeID
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	exited chan error

	mu   sync.Mutex
	tail []string // last stderr lines, for the failure message
}

func (c *child) lastErr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.tail) == 0 {
		return "no error output"
	}
	return c.tail[len(c.tail)-1]
}

// runLocal starts the coordinator, the servers and the workers as child
// processes on 127.0.0.1, with one static address book: each node's port
// is one the kernel handed out a moment before (bound and released here).
// It streams their output prefixed with their names and waits for all of
// them. Closing a child's stdin (or this process dying) makes it exit.
//
// A port another process takes between its release here and the child's
// listen (the kernel hands ports out to outgoing connections too) fails
// that child at start-up, before anything trains: the run then starts
// again on new ports, at most localAttempts times in all.
func runLocal(ctx context.Context, lc localConfig) error {
	secret := lc.secret
	if secret == "" {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return err
		}
		secret = hex.EncodeToString(b)
	}
	ctx, cancel := context.WithTimeoutCause(ctx, lc.timeout, fmt.Errorf("run exceeded -timeout %v", lc.timeout))
	defer cancel()
	for attempt := 1; ; attempt++ {
		err := runLocalOnce(ctx, lc, secret, attempt)
		if !errors.Is(err, errPortTaken) || attempt == localAttempts {
			return err
		}
		fmt.Fprintf(lc.stdout, "local: %v; starting again on new ports\n", err)
	}
}

// runLocalOnce is one start of runLocal.
func runLocalOnce(ctx context.Context, lc localConfig, secret string, attempt int) error {
	var outMu sync.Mutex
	names := nodeNames(lc.servers, lc.workers)
	addrs, err := loopbackAddrs(names)
	if err != nil {
		return err
	}
	if lc.tookAddrs != nil {
		lc.tookAddrs(attempt, addrs)
	}
	book := formatPeers(names, addrs)
	fmt.Fprintf(lc.stdout, "local: starting %d processes (%d servers, %d workers, coordinator) on 127.0.0.1\n",
		len(names), lc.servers, lc.workers)
	var children []*child
	defer func() { // never leave a child behind
		for _, c := range children {
			c.stdin.Close()
		}
		for _, c := range children {
			select {
			case <-c.exited:
			case <-time.After(5 * time.Second):
				c.cmd.Process.Kill()
				<-c.exited
			}
		}
	}()
	for k, name := range names {
		role, rank, _ := ps.ParseNode(name, lc.servers, lc.workers)
		args := append([]string{"-role=" + string(role), fmt.Sprintf("-rank=%d", rank), "-child", "-peers=" + book, "-listen=" + addrs[name]}, lc.args...)
		args = append(args, lc.tls...)
		if lc.timeline != "" && role != ps.RoleServer { // servers emit no timeline events
			args = append(args, "-timeline="+strings.TrimSuffix(lc.timeline, ".json")+"-"+string(name)+".json")
		}
		if lc.metricsAddr != "" {
			a, err := childMetricsAddr(lc.metricsAddr, k)
			if err != nil {
				return err
			}
			args = append(args, "-metrics-addr="+a)
		}
		cmd := exec.Command(lc.exe, args...)
		s := secret
		if o, ok := lc.secretFor[name]; ok {
			s = o
		}
		cmd.Env = append(os.Environ(), "FALCON_SECRET="+s)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		stderr, err := cmd.StderrPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("starting %s: %w", name, err)
		}
		c := &child{name: name, cmd: cmd, stdin: stdin, exited: make(chan error, 1)}
		children = append(children, c)
		var readers sync.WaitGroup
		readers.Add(2)
		go func() { // stdout: prefixed output
			defer readers.Done()
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				line := sc.Text()
				outMu.Lock()
				if name == ps.CoordinatorNode && strings.HasPrefix(line, "cluster ") {
					fmt.Fprintln(lc.stdout, line) // the summary line, unprefixed
				} else {
					fmt.Fprintf(lc.stdout, "[%s] %s\n", name, line)
				}
				outMu.Unlock()
			}
		}()
		go func() { // stderr: prefixed, the last lines kept
			defer readers.Done()
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				line := sc.Text()
				c.mu.Lock()
				c.tail = append(c.tail, line)
				if len(c.tail) > 5 {
					c.tail = c.tail[1:]
				}
				c.mu.Unlock()
				outMu.Lock()
				fmt.Fprintf(lc.stderr, "[%s] %s\n", name, line)
				outMu.Unlock()
			}
		}()
		go func() {
			readers.Wait() // os/exec: read the pipes fully before Wait
			c.exited <- cmd.Wait()
			close(c.exited)
		}()
	}

	// Wait for every child; the first failure or the timeout ends the run.
	type exit struct {
		c   *child
		err error
	}
	exits := make(chan exit, len(children))
	for _, c := range children {
		go func() {
			err := <-c.exited
			exits <- exit{c, err}
		}()
	}
	var failures, stopped []string
	taken := false
	finished := make(map[transport.NodeID]bool, len(children))
	start := time.Now()
	for range children {
		select {
		case e := <-exits:
			finished[e.c.name] = true
			switch {
			case e.err == nil:
			case len(failures) > 0 && strings.Contains(e.c.lastErr(), errParentGone.Error()):
				stopped = append(stopped, string(e.c.name)) // we stopped it
			default:
				failures = append(failures, fmt.Sprintf("%s failed (%v): %s", e.c.name, e.err, e.c.lastErr()))
				e.c.mu.Lock()
				taken = taken || len(failures) == 1 && strings.Contains(strings.Join(e.c.tail, "\n"), "address already in use")
				e.c.mu.Unlock()
				if len(failures) == 1 { // stop the others: they exit on stdin EOF
					for _, c := range children {
						c.stdin.Close()
					}
				}
			}
		case <-ctx.Done():
			var running []string
			for _, c := range children {
				if !finished[c.name] {
					running = append(running, string(c.name))
				}
			}
			msg := fmt.Sprintf("%v (still running: %s)", context.Cause(ctx), strings.Join(running, ", "))
			if len(failures) > 0 {
				msg += "; " + strings.Join(failures, "; ")
			}
			return errors.New(msg)
		}
	}
	if len(failures) > 0 {
		msg := strings.Join(failures, "; ")
		if len(stopped) > 0 {
			msg += fmt.Sprintf(" (then stopped %s)", strings.Join(stopped, ", "))
		}
		if taken {
			return fmt.Errorf("%w (%w): %s", errChildFailed, errPortTaken, msg)
		}
		return fmt.Errorf("%w: %s", errChildFailed, msg)
	}
	fmt.Fprintf(lc.stdout, "local: all %d processes exited cleanly (%.2fs after start-up)\n", len(children), time.Since(start).Seconds())
	return nil
}

// loopbackAddrs gives each node a free port on 127.0.0.1. Every port is
// held open until all are chosen: a port closed at once could be handed
// out again for the next node (two servers were given one port under
// load). Another process can still take a port between the close and
// the child's listen; the child then fails naming it.
func loopbackAddrs(names []transport.NodeID) (map[transport.NodeID]string, error) {
	addrs := make(map[transport.NodeID]string, len(names))
	held := make([]net.Listener, 0, len(names))
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for _, n := range names {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		held = append(held, l)
		addrs[n] = l.Addr().String()
	}
	return addrs, nil
}
