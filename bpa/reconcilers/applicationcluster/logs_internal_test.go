package applicationcluster

import (
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"

	"github.com/edgefleet/edgefleet/bpa/cluster"
	"github.com/edgefleet/edgefleet/bpa/install"
	"github.com/edgefleet/edgefleet/pkg/sshexec"
)

// TestLogLevels: a level that ran steps is logged with its wall time, slowest job and time by
// kind of step; a level found done is not; the last level of a failed install says so.
func TestLogLevels(t *testing.T) {
	step := func(name string, d time.Duration, skipped bool) sshexec.Result {
		return sshexec.Result{Step: name, Duration: d, Skipped: skipped}
	}
	res := &cluster.Result{Levels: []cluster.Level{
		{Packages: []string{"etcd"}, Took: time.Second, Jobs: []cluster.Job{ // found done
			{Host: "cp-0", Package: "etcd", Install: install.Report{Steps: []sshexec.Result{step("stage", 0, true), step("activate", 0, true)}}},
		}},
		{Packages: []string{"kubelet", "kube-scheduler"}, Took: 12 * time.Second, Jobs: []cluster.Job{
			{Host: "cp-0", Package: "kube-scheduler", Took: 3 * time.Second,
				Files:   []sshexec.Result{step("write /etc/a", 100*time.Millisecond, false)},
				Install: install.Report{Steps: []sshexec.Result{step("stage", time.Second, false), step("activate", 2*time.Second, false)}}},
			{Host: "w-0", Package: "kubelet", Took: 11500 * time.Millisecond,
				Install: install.Report{Steps: []sshexec.Result{step("stage", 1500*time.Millisecond, false), step("activate", 10*time.Second, false)}},
				Imports: []sshexec.Result{step("import pause", time.Second, true)}},
		}},
	}}
	var lines []string
	log := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{})

	logLevels(log, res, true)
	want := `"level"=0 "msg"="installed level" "index"=1 "packages"="kubelet,kube-scheduler" "hosts"=2 "took"="12s" "slowest"="w-0/kubelet" "slowestTook"="11.5s" "stepsRan"=5 "stepTimes"="write 100ms, stage 2.5s, activate 12s"`
	if len(lines) != 1 || lines[0] != want {
		t.Errorf("logged %q, want only\n%s", lines, want)
	}

	lines = nil
	logLevels(log, res, false)
	if len(lines) != 1 || !strings.HasPrefix(lines[0], `"level"=0 "msg"="level not installed" "index"=1 `) {
		t.Errorf("a failed install logged %q, want its last level not installed", lines)
	}
}
