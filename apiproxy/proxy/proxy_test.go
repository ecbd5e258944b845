package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgefleet/edgefleet/test/testutil"
)

// apiServer stands in for an API server: HTTPS, /readyz answering what ready says, and any
// other path answering its name.
type apiServer struct {
	name  string
	ready atomic.Bool
	srv   *httptest.Server
}

func startAPIServer(t *testing.T, name string) *apiServer {
	t.Helper()
	a := &apiServer{name: name}
	a.ready.Store(true)
	a.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" && !a.ready.Load() {
			http.Error(w, "[-]shutdown failed", http.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(w, a.name)
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *apiServer) addr() string { return a.srv.Listener.Addr().String() }

// serve runs a proxy with opts on a loopback port until the test ends, logging to logs (nil:
// nowhere); stop ends it sooner and returns Serve's error.
func serve(tb testing.TB, opts Options, logs io.Writer) (addr string, stop func() error) {
	tb.Helper()
	if logs == nil {
		logs = io.Discard
	}
	p, err := New(opts, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, ln) }()
	var once sync.Once
	var serveErr error
	stop = func() error {
		once.Do(func() { cancel(); serveErr = <-done })
		return serveErr
	}
	tb.Cleanup(func() {
		if err := stop(); err != nil {
			tb.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String(), stop
}

// startProxy serves a proxy over backends on a loopback port until the test ends.
func startProxy(t *testing.T, opts Options, backends ...string) string {
	t.Helper()
	opts.Backends = backends
	addr, _ := serve(t, opts, nil)
	return addr
}

// tcpServer serves each connection a loopback listener accepts with handle, until the test
// ends; it returns the listener's address.
func tcpServer(tb testing.TB, handle func(net.Conn)) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go handle(conn)
		}
	}()
	return ln.Addr().String()
}

// echo writes back what it reads until the client closes.
func echo(conn net.Conn) {
	_, _ = io.Copy(conn, conn)
	_ = conn.Close()
}

func fastOptions() Options {
	o := DefaultOptions()
	o.HealthInterval = 20 * time.Millisecond
	o.HealthTimeout = time.Second
	o.MoveAfter = 100 * time.Millisecond
	return o
}

// client is an HTTPS client of the API servers through the proxy, keeping one connection
// between requests as a kubelet does; it trusts the stand-ins' certificate (a's, all share it).
func client(a *apiServer) *http.Client {
	tr := a.srv.Client().Transport.(*http.Transport).Clone()
	tr.MaxConnsPerHost = 1
	return &http.Client{Transport: tr, Timeout: 5 * time.Second}
}

func get(c *http.Client, addr string) (string, error) {
	resp, err := c.Get("https://" + addr + "/api")
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// answeredBy waits until a request through the proxy is answered by want, and returns how many
// requests it took.
func answeredBy(t *testing.T, c *http.Client, addr, want string) int {
	t.Helper()
	n := 0
	testutil.WaitFor(t, 10*time.Second, "a request through the proxy answered by "+want, func() (bool, string) {
		n++
		got, err := get(c, addr)
		if err != nil {
			return false, err.Error()
		}
		return got == want, fmt.Sprintf("answer %q", got)
	})
	return n
}

func TestPrefersTheFirstReadyAPIServer(t *testing.T) {
	a, b := startAPIServer(t, "a"), startAPIServer(t, "b")
	addr := startProxy(t, fastOptions(), a.addr(), b.addr())
	c := client(a)
	for range 5 {
		if got, err := get(c, addr); err != nil || got != "a" {
			t.Fatalf("answer %q, %v; want the first API server's", got, err)
		}
	}
}

func TestNewConnectionsGoToAReadyAPIServer(t *testing.T) {
	a, b := startAPIServer(t, "a"), startAPIServer(t, "b")
	addr := startProxy(t, fastOptions(), a.addr(), b.addr())
	a.ready.Store(false)
	c := client(a)
	c.Transport.(*http.Transport).DisableKeepAlives = true
	answeredBy(t, c, addr, "b")
	for range 5 {
		if got, err := get(c, addr); err != nil || got != "b" {
			t.Fatalf("answer %q, %v while the first API server is not ready; want the second's", got, err)
		}
	}
	a.ready.Store(true)
	answeredBy(t, c, addr, "a")
}

func TestARefusedConnectionGoesToTheNext(t *testing.T) {
	a, b := startAPIServer(t, "a"), startAPIServer(t, "b")
	opts := fastOptions()
	opts.HealthInterval = time.Hour // only the refusal can tell
	addr := startProxy(t, opts, a.addr(), b.addr())
	a.srv.Close()
	c := client(b)
	if got, err := get(c, addr); err != nil || got != "b" {
		t.Fatalf("answer %q, %v with the first API server stopped; want the second's at the first try", got, err)
	}
}

func TestConnectionsMoveOffAnAPIServerThatIsNotReady(t *testing.T) {
	a, b := startAPIServer(t, "a"), startAPIServer(t, "b")
	addr := startProxy(t, fastOptions(), a.addr(), b.addr())
	c := client(a) // one kept connection, as a kubelet's
	if got, err := get(c, addr); err != nil || got != "a" {
		t.Fatalf("answer %q, %v; want a's", got, err)
	}
	// a stops being ready but still serves its connections: the kept one must be closed for
	// the client to reach b.
	a.ready.Store(false)
	answeredBy(t, c, addr, "b")
}

func TestConnectionsStayWhenNoAPIServerIsReady(t *testing.T) {
	a, b := startAPIServer(t, "a"), startAPIServer(t, "b")
	addr := startProxy(t, fastOptions(), a.addr(), b.addr())
	c := client(a)
	var conns atomic.Int32
	c.Transport.(*http.Transport).DialContext = func(ctx context.Context, network, address string) (net.Conn, error) {
		conns.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, network, address)
	}
	if got, err := get(c, addr); err != nil || got != "a" {
		t.Fatalf("answer %q, %v; want a's", got, err)
	}
	a.ready.Store(false)
	b.ready.Store(false)
	deadline := time.Now().Add(10 * fastOptions().MoveAfter)
	for time.Now().Before(deadline) {
		if got, err := get(c, addr); err != nil || got != "a" {
			t.Fatalf("answer %q, %v with no API server ready; want a's, on the kept connection", got, err)
		}
		time.Sleep(20 * time.Millisecond) // a request each 20ms probes the kept connection: not testutil.Consistently's 100ms
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections made; want the one kept (nothing to move to)", n)
	}
}

func TestAnAPIServerClosingClosesTheClient(t *testing.T) {
	backend := tcpServer(t, func(conn net.Conn) {
		_, _ = io.WriteString(conn, "bye\n")
		_ = conn.Close()
	})
	opts := fastOptions()
	opts.HealthInterval = time.Hour
	addr := startProxy(t, opts, backend)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(conn)
	if err != nil || string(got) != "bye\n" {
		t.Fatalf("read %q, %v; want the server's words, then the end of the connection", got, err)
	}
}

func TestMaxConnections(t *testing.T) {
	backend := tcpServer(t, echo)
	opts := fastOptions()
	opts.HealthInterval = time.Hour
	opts.MaxConnections = 1
	addr := startProxy(t, opts, backend)
	hello := func(conn net.Conn) (string, error) {
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(conn, "hello\n"); err != nil {
			return "", err
		}
		return bufio.NewReader(conn).ReadString('\n')
	}
	first, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := hello(first); err != nil || got != "hello\n" {
		t.Fatalf("first connection: %q, %v", got, err)
	}
	second, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := hello(second); err == nil {
		t.Fatalf("second connection answered %q over the limit of one; want it closed", got)
	}
	_ = second.Close()
	_ = first.Close()
	testutil.WaitFor(t, 5*time.Second, "a connection forwarded after the first closed", func() (bool, string) {
		third, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		got, err := hello(third)
		_ = third.Close()
		return err == nil && got == "hello\n", fmt.Sprintf("%q, %v", got, err)
	})
}

func TestValidate(t *testing.T) {
	good := DefaultOptions()
	good.Backends = []string{"10.0.0.1:6443", "10.0.0.2:6443"}
	if err := good.Validate(); err != nil {
		t.Fatalf("good options: %v", err)
	}
	for _, tt := range []struct {
		name string
		edit func(*Options)
		want string
	}{
		{"no backend", func(o *Options) { o.Backends = nil }, "--backend: none"},
		{"backend without port", func(o *Options) { o.Backends = []string{"10.0.0.1"} }, `--backend "10.0.0.1": want host:port`},
		{"backend port out of range", func(o *Options) { o.Backends = []string{"10.0.0.1:70000"} }, `port "70000"`},
		{"backend twice", func(o *Options) { o.Backends = []string{"10.0.0.1:6443", "10.0.0.1:6443"} }, "named twice"},
		{"listen without host", func(o *Options) { o.Listen = ":6444" }, `--listen ":6444": no host`},
		{"zero interval", func(o *Options) { o.HealthInterval = 0 }, "--health-interval 0s: must be positive"},
		{"zero move-after", func(o *Options) { o.MoveAfter = 0 }, "--move-after"},
		{"no connections", func(o *Options) { o.MaxConnections = 0 }, "--max-connections 0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := good
			o.Backends = append([]string(nil), good.Backends...)
			tt.edit(&o)
			err := o.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v; want one saying %q", err, tt.want)
			}
		})
	}
}

func TestServeClosesForwardedConnectionsWhenItEnds(t *testing.T) {
	held := make(chan net.Conn, 1)
	// It holds the forwarded connection open, silent, once its hello came; the health checks'
	// connections it closes.
	backend := tcpServer(t, func(conn net.Conn) {
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		if line, err := bufio.NewReader(conn).ReadString('\n'); err != nil || line != "hello\n" {
			_ = conn.Close()
			return
		}
		held <- conn
	})
	opts := fastOptions()
	opts.Backends = []string{backend}
	addr, stop := serve(t, opts, nil)
	t.Cleanup(func() { // before serve's own cleanup, which waits for the connection's end
		select {
		case conn := <-held:
			_ = conn.Close()
		default:
		}
	})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	_, _ = io.WriteString(conn, "hello\n") // forwarded once the proxy has dialled
	// Wait for the hello at the backend: the proxy then holds no unread bytes of the client,
	// whose connection it would reset when closing, not end.
	testutil.WaitFor(t, 5*time.Second, "the client's hello forwarded to the backend", func() (bool, string) {
		return len(held) == 1, "not at the backend"
	})
	done := make(chan error, 1)
	go func() { done <- stop() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return with a forwarded connection open")
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := conn.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("read %d bytes, %v from the client's end after Serve returned; want the end of the connection", n, err)
	}
}

func TestNoAPIServerSaysWhatWasTried(t *testing.T) {
	var logs strings.Builder
	var mu sync.Mutex
	opts := fastOptions()
	opts.HealthInterval = time.Hour
	opts.Backends = []string{"127.0.0.1:1"} // nothing listens there
	addr, _ := serve(t, opts, lockedWriter{&mu, &logs})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("read %v; want the connection closed, no API server taking it", err)
	}
	mu.Lock()
	defer mu.Unlock()
	var line string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "no API server accepted it") {
			line = l
		}
	}
	for _, want := range []string{"--backend", "127.0.0.1:1", "connection refused"} {
		if !strings.Contains(line, want) {
			t.Errorf("the closed connection's log line %q does not say %q (log:\n%s)", line, want, logs.String())
		}
	}
}

// lockedWriter serializes a logger's writes to a builder the test reads.
type lockedWriter struct {
	mu *sync.Mutex
	b  *strings.Builder
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
