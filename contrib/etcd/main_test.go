package etcd

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// testEtcd is the embedded etcd server every test uses (TestMain starts
// it); when it could not start, testEtcd.err says why and tests skip.
var testEtcd struct {
	endpoint string
	err      error
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "falcon-etcd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	e, endpoint, err := startEtcd(dir)
	testEtcd.endpoint, testEtcd.err = endpoint, err
	code := m.Run()
	if e != nil {
		e.Close()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// startEtcd starts a one-member etcd in dir on two free localhost ports
// (three tries: a port picked free may be taken before etcd binds it).
func startEtcd(dir string) (*embed.Etcd, string, error) {
	var err error
	for try := range 3 {
		var cu, pu url.URL
		cu, err = freeURL()
		if err != nil {
			continue
		}
		pu, err = freeURL()
		if err != nil {
			continue
		}
		cfg := embed.NewConfig()
		cfg.Name = "falcon-test"
		cfg.Dir = filepath.Join(dir, strconv.Itoa(try))
		cfg.LogLevel = "fatal"   // its errors at Close are expected; a failed start is returned
		cfg.UnsafeNoFsync = true // a test's data need not survive a power cut
		// The backend maps quota + 10 % (the default maps 10 GiB, which
		// the fuzz script's 8 GB address-space limit refuses: etcd then
		// panics at start).
		cfg.QuotaBackendBytes = 512 << 20
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
		cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
		var e *embed.Etcd
		e, err = embed.StartEtcd(cfg)
		if err != nil {
			continue
		}
		select {
		case <-e.Server.ReadyNotify():
			return e, cu.String(), nil
		case err = <-e.Err():
		case <-time.After(60 * time.Second):
			err = fmt.Errorf("not ready within 60s")
		}
		e.Close()
	}
	return nil, "", err
}

func freeURL() (url.URL, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return url.URL{}, err
	}
	defer l.Close()
	return url.URL{Scheme: "http", Host: l.Addr().String()}, nil
}

// needEtcd skips t when the embedded etcd server did not start.
func needEtcd(t *testing.T) string {
	t.Helper()
	if testEtcd.err != nil {
		t.Skipf("embedded etcd server could not start (%v): etcd tests skipped", testEtcd.err)
	}
	return testEtcd.endpoint
}
