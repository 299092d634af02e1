// Command testenv runs a real kube-apiserver backed by an embedded etcd, on loopback,
// for kumaco's tests. It is test infrastructure only: kumaco itself is Rust.
//
//	testenv serve --dir DIR
//	    Starts etcd and kube-apiserver in this process. DIR keeps the PKI, the etcd data
//	    and the ports, so killing the process (even with SIGKILL) and serving the same DIR
//	    again brings back the same cluster at the same address. When the API server is
//	    ready (/readyz is 200 and the default namespace exists) one line is printed to
//	    stdout:  TESTENV_READY {"url":...,"kubeconfig":...,"pid":...}
//	    SIGTERM/SIGINT stop it cleanly. With --cluster it is ready for a
//	    kube-controller-manager, a kube-scheduler and kubelets beside it
//	    (testkit::realcluster): the ServiceAccount admission plugin on, the Node
//	    authorizer and NodeRestriction, a client certificate for the kubelets' API.
//
//	testenv kubeconfig --dir DIR --user NAME [--group G]... --out FILE
//	    Writes a kubeconfig for any user and groups, authenticated by a client
//	    certificate signed by DIR's cluster CA (for RBAC tests).
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "kubeconfig":
		err = kubeconfigCmd(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: testenv serve --dir DIR | testenv kubeconfig --dir DIR --user NAME [--group G]... --out FILE")
	os.Exit(2)
}

// state is what must survive a restart on the same directory: the addresses clients and
// etcd's own member record already know.
type state struct {
	APIPort      int `json:"apiPort"`
	EtcdClient   int `json:"etcdClientPort"`
	EtcdPeerPort int `json:"etcdPeerPort"`
}

func loadOrCreateState(dir string) (state, error) {
	path := filepath.Join(dir, "state.json")
	var s state
	if b, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(b, &s); err != nil {
			return s, fmt.Errorf("reading %s: %w", path, err)
		}
		return s, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return s, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return s, err
	}
	s = state{APIPort: ports[0], EtcdClient: ports[1], EtcdPeerPort: ports[2]}
	b, _ := json.Marshal(s)
	return s, os.WriteFile(path, b, 0o600)
}

// freePorts asks the kernel for n distinct free loopback ports. Holding all listeners
// open until the end keeps the kernel from handing out the same port twice.
func freePorts(n int) ([]int, error) {
	var ports []int
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	dir := fs.String("dir", "", "directory for PKI, etcd data and state (created if missing, reused if present)")
	extra := fs.String("apiserver-args", "", "extra kube-apiserver flags, space separated")
	stdinLifeline := fs.Bool("exit-on-stdin-close", false, "stop cleanly when stdin reaches EOF (the parent test process died)")
	cluster := fs.Bool("cluster", false, "a kube-controller-manager, a kube-scheduler and a kubelet will run against this server (testkit::realcluster): keep the ServiceAccount admission plugin (it mounts Pods' tokens), authorize kubelets with the Node authorizer and NodeRestriction, and give the server a client certificate for the kubelets (logs, exec)")
	fs.Parse(args)
	if *dir == "" {
		return errors.New("serve: --dir is required")
	}
	absDir, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(absDir, 0o700); err != nil {
		return err
	}
	st, err := loadOrCreateState(absDir)
	if err != nil {
		return err
	}
	p, err := ensurePKI(absDir)
	if err != nil {
		return fmt.Errorf("preparing PKI: %w", err)
	}
	apiURL := fmt.Sprintf("https://127.0.0.1:%d", st.APIPort)
	adminKubeconfig := filepath.Join(absDir, "admin.kubeconfig")
	if err := writeKubeconfig(adminKubeconfig, apiURL, p, "testenv-admin", []string{"system:masters"}); err != nil {
		return err
	}

	etcd, err := startEtcd(absDir, st)
	if err != nil {
		return fmt.Errorf("starting etcd: %w", err)
	}
	defer etcd.Close()

	flags := []string{
		fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", st.EtcdClient),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", st.APIPort),
		"--tls-cert-file=" + p.servingCert,
		"--tls-private-key-file=" + p.servingKey,
		"--client-ca-file=" + p.caCert,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + p.saPub,
		"--service-account-signing-key-file=" + p.saKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--feature-gates=NodeLifecycleConditions=true",
		// The kubernetes Service's endpoints may not point at loopback; nothing here
		// routes to it anyway.
		"--endpoint-reconciler-type=none",
		"--allow-privileged=true",
		"--profiling=false",
		"--v=0",
	}
	if *cluster {
		clientCert, clientKey, err := p.kubeletClientCert()
		if err != nil {
			return err
		}
		flags = append(flags,
			"--authorization-mode=Node,RBAC",
			"--enable-admission-plugins=NodeRestriction",
			"--kubelet-client-certificate="+clientCert,
			"--kubelet-client-key="+clientKey,
			// A kubelet's node name (--hostname-override) need not resolve: reach it at
			// the address it reports.
			"--kubelet-preferred-address-types=InternalIP,Hostname",
		)
	} else {
		flags = append(flags,
			"--authorization-mode=RBAC",
			// No kube-controller-manager runs here, so no default ServiceAccounts exist
			// for the ServiceAccount admission plugin to require.
			"--disable-admission-plugins=ServiceAccount",
		)
	}
	if *extra != "" {
		flags = append(flags, strings.Fields(*extra)...)
	}

	cmd := app.NewAPIServerCommand()
	cmd.SetArgs(flags)
	if *stdinLifeline {
		// A test process that exits (or crashes) without stopping us closes our stdin;
		// turning that into SIGTERM leaves no stray API servers behind.
		go func() {
			io.Copy(io.Discard, os.Stdin)
			syscall.Kill(os.Getpid(), syscall.SIGTERM)
		}()
	}

	readyErr := make(chan error, 1)
	go func() {
		readyErr <- waitReady(cmd.Context(), apiURL, p)
	}()
	go func() {
		if err := <-readyErr; err != nil {
			fmt.Fprintf(os.Stderr, "testenv: waiting for readiness: %v\n", err)
			return
		}
		line, _ := json.Marshal(map[string]any{
			"url":        apiURL,
			"kubeconfig": adminKubeconfig,
			"pid":        os.Getpid(),
			"dir":        absDir,
		})
		fmt.Printf("TESTENV_READY %s\n", line)
	}()

	// cli.Run blocks until the API server stops (SIGTERM/SIGINT) and returns its exit
	// code; etcd is closed by the deferred Close on the way out.
	if code := cli.Run(cmd); code != 0 {
		return fmt.Errorf("kube-apiserver exited with code %d", code)
	}
	return nil
}

func startEtcd(dir string, st state) (*embed.Etcd, error) {
	cfg := embed.NewConfig()
	cfg.Name = "testenv"
	cfg.Dir = filepath.Join(dir, "etcd")
	client := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", st.EtcdClient)}
	peer := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", st.EtcdPeerPort)}
	cfg.ListenClientUrls = []url.URL{client}
	cfg.AdvertiseClientUrls = []url.URL{client}
	cfg.ListenPeerUrls = []url.URL{peer}
	cfg.AdvertisePeerUrls = []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	// Test data only: durability against power loss is not worth the fsync latency.
	cfg.UnsafeNoFsync = true
	cfg.LogLevel = "error"
	cfg.WatchProgressNotifyInterval = 5 * time.Second
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err := <-e.Err():
		e.Close()
		return nil, err
	case <-time.After(60 * time.Second):
		e.Close()
		return nil, errors.New("etcd did not become ready within 60s")
	}
}

// waitReady polls until /readyz answers 200 and the default namespace exists (the API
// server creates it asynchronously after it reports ready).
func waitReady(ctx context.Context, apiURL string, p pki) error {
	if ctx == nil {
		ctx = context.Background()
	}
	certPEM, keyPEM, err := p.issueClientCert("testenv-readiness", []string{"system:masters"})
	if err != nil {
		return err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AddCert(p.ca)
	client := &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs:      pool,
			Certificates: []tls.Certificate{cert},
		}},
	}
	deadline := time.Now().Add(5 * time.Minute)
	for _, path := range []string{"/readyz", "/api/v1/namespaces/default"} {
		for {
			resp, err := client.Get(apiURL + path)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s not 200 after 5 minutes (last error: %v)", path, err)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

func kubeconfigCmd(args []string) error {
	fs := flag.NewFlagSet("kubeconfig", flag.ExitOnError)
	dir := fs.String("dir", "", "the directory a `testenv serve` uses")
	user := fs.String("user", "", "user name (certificate CN)")
	out := fs.String("out", "", "kubeconfig file to write")
	var groups multiFlag
	fs.Var(&groups, "group", "group (certificate O), repeatable")
	fs.Parse(args)
	if *dir == "" || *user == "" || *out == "" {
		return errors.New("kubeconfig: --dir, --user and --out are required")
	}
	b, err := os.ReadFile(filepath.Join(*dir, "state.json"))
	if err != nil {
		return fmt.Errorf("kubeconfig: %s has no state.json; run `testenv serve --dir %s` first: %w", *dir, *dir, err)
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return err
	}
	p, err := ensurePKI(*dir)
	if err != nil {
		return err
	}
	return writeKubeconfig(*out, fmt.Sprintf("https://127.0.0.1:%d", st.APIPort), p, *user, groups)
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }
