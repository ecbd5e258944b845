package charts_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/edgefleet/edgefleet/bpa/charts"
	"github.com/edgefleet/edgefleet/test/builders"
)

// childEnv makes the test binary a child process that applies one release (childJob, read from
// standard input) and is killed by the test in the middle of it.
const childEnv = "EDGEFLEET_CHARTS_TEST_CHILD"

type childJob struct {
	Kubeconfig []byte
	Release    charts.Release
}

func applyInChild() int {
	var job childJob
	if err := json.NewDecoder(os.Stdin).Decode(&job); err != nil {
		fmt.Fprintln(os.Stderr, "child: read the job:", err)
		return 2
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(job.Kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	inst, err := charts.New(cfg, charts.Options{HookTimeout: 10 * time.Minute})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	st, err := inst.Apply(context.Background(), job.Release)
	fmt.Fprintf(os.Stderr, "child: Apply returned %+v, %v\n", st, err)
	return 1 // it should have been killed before
}

// hookJob adds a pre-install and pre-upgrade hook, when the value hook is true: a Job, which never
// completes in a cluster without controllers or kubelets, so helm waits for it with the release
// pending.
func hookJob(t *testing.T) func(dir string) {
	return func(dir string) {
		writeTemplate(t, dir, "hook.yaml", `{{- if .Values.hook }}
apiVersion: batch/v1
kind: Job
metadata:
  name: {{ .Release.Name }}-hook
  annotations:
    helm.sh/hook: pre-install,pre-upgrade
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: hook
          image: registry.invalid/edgefleet/hook:1
{{- end }}
`)
	}
}

// killApply runs Apply of r in a child process and kills it (SIGKILL) once the release's last
// revision is in state want and the hook Job helm waits for exists.
func killApply(t *testing.T, inst *charts.Installer, r charts.Release, want charts.State) {
	t.Helper()
	kc, err := cp.AdminKubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	in, err := json.Marshal(childJob{Kubeconfig: kc, Release: r})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.Stdin = bytes.NewReader(in)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Kill()
			if err := <-done; err == nil {
				t.Log("the child ended cleanly")
			}
		}
	})

	deadline := time.Now().Add(time.Minute)
	for {
		st, err := inst.Status(t.Context(), r.Name, r.Namespace)
		if err != nil {
			t.Fatal(err)
		}
		err = cp.Client.Get(t.Context(), client.ObjectKey{Namespace: r.Namespace, Name: r.Name + "-hook"}, &batchv1.Job{})
		if st.State == want && err == nil {
			break
		}
		select {
		case err := <-done:
			killed = true
			t.Fatalf("the child ended (%v) before it was killed; release %+v:\n%s", err, st, out.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the release is still %s (%s), want %s with its hook Job; child:\n%s", st.State, st.Message, want, out.String())
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	err = <-done
	killed = true
	if err == nil || cmd.ProcessState.String() != "signal: killed" {
		t.Fatalf("the child ended with %v (%s), want killed:\n%s", err, cmd.ProcessState, out.String())
	}
}

// TestRecoversFromKilledApply: a BPA killed while helm waits for a hook leaves the release
// pending-install or pending-upgrade; the next Apply marks that revision failed and deploys.
func TestRecoversFromKilledApply(t *testing.T) {
	chart := builders.BuildChart(t, "hello", "", hookJob(t))
	tests := []struct {
		name      string
		before    map[string]any // values deployed before the killed Apply; nil: nothing
		pending   charts.State
		wantRevs  map[int]string
		wantFinal int
	}{
		// The upgrade over the interrupted install, which never deployed, supersedes it.
		{"killed during the install", nil, charts.StatePendingInstall,
			map[int]string{1: "superseded", 2: "deployed"}, 2},
		{"killed during an upgrade", map[string]any{"greeting": "before"}, charts.StatePendingUpgrade,
			map[int]string{1: "superseded", 2: "failed", 3: "deployed"}, 3},
	}
	inst := newInstaller(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := cp.Namespace(t)
			const name = "killed"
			r := charts.Release{Name: name, Namespace: ns, Chart: chart.Archive}
			if tt.before != nil {
				r.Values = tt.before
				if _, err := inst.Apply(t.Context(), r); err != nil {
					t.Fatal(err)
				}
			}
			r.Values = map[string]any{"greeting": "killed", "hook": true}
			killApply(t, inst, r, tt.pending)

			// The stopped process left the new revision pending.
			st, err := inst.Status(t.Context(), name, ns)
			if err != nil {
				t.Fatal(err)
			}
			if st.State != tt.pending || st.Revision != tt.wantFinal-1 {
				t.Fatalf("after the kill: %+v, want revision %d %s", st, tt.wantFinal-1, tt.pending)
			}

			r.Values = map[string]any{"greeting": "recovered"}
			st, err = inst.Apply(t.Context(), r)
			checkErr(t, err, nil)
			if st.State != charts.StateDeployed || st.Revision != tt.wantFinal || st.DeployedRevision != tt.wantFinal {
				t.Errorf("status %+v, want revision %d deployed", st, tt.wantFinal)
			}
			revs := revisions(t, ns, name)
			if fmt.Sprint(revs) != fmt.Sprint(tt.wantRevs) {
				t.Errorf("helm storage holds %v, want %v", revs, tt.wantRevs)
			}
			want := hello{greeting: "recovered", chartLabel: "hello-0.1.0", replicas: 1, serviceAccount: true}
			if objs, ok := readHello(t, ns, name); !ok || objs != want {
				t.Errorf("the chart's objects: %+v (there: %v), want %+v", objs, ok, want)
			}
			// And once more: nothing to do.
			st, err = inst.Apply(t.Context(), r)
			checkErr(t, err, nil)
			if st.Revision != tt.wantFinal || len(revisions(t, ns, name)) != len(tt.wantRevs) {
				t.Errorf("a second Apply made revision %d", st.Revision)
			}
		})
	}
}

func tarball(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, text := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(text)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(text)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
