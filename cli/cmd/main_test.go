package cmd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/edgefleet/edgefleet/test/controlplane"
)

// global is a real API server with the CRDs; no controller runs against it: the tests check
// what the commands write, and how they print the status a controller would have written,
// which the tests write themselves through the status subresource (fixture data).
var global *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.Run(m, controlplane.Options{Name: "global", InstallCRDs: true}, func(_ context.Context, cp *controlplane.ControlPlane) error {
		global = cp
		return nil
	}))
}

// adminKubeconfig writes the test API server's admin kubeconfig and returns its path.
func adminKubeconfig(t *testing.T) string {
	t.Helper()
	return kubeconfigOf(t, global)
}

// kubeconfigOf writes the admin kubeconfig of cp and returns its path.
func kubeconfigOf(t *testing.T, cp *controlplane.ControlPlane) string {
	t.Helper()
	kc, err := cp.AdminKubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// run runs the CLI with args against the test API server and returns its output (stdout and
// stderr).
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return runAs(t, adminKubeconfig(t), args...)
}

// runAs runs the CLI with args and a kubeconfig and returns its output (stdout and stderr).
func runAs(t *testing.T, kubeconfig string, args ...string) (string, error) {
	t.Helper()
	out := &syncBuffer{}
	err := <-start(t, out, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	return out.String(), err
}

// start runs the CLI with args (kubeconfig included) in the background, its output (stdout
// and stderr) into out, and returns where its result comes.
func start(t *testing.T, out *syncBuffer, args ...string) <-chan error {
	t.Helper()
	root := NewRoot()
	root.SetOut(out)
	root.SetErr(out)
	root.SetArgs(args)
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(t.Context()) }()
	return done
}

// syncBuffer is a buffer a command writes while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
