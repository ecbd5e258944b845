package testhosts

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/edgefleet/edgefleet/test/testutil"
)

// Workloads of the real node stack's test beds: pods of the webapp image (hack/images/webapp),
// which is both the test application and its HTTP client (webapp -get URL), and a host's
// requests to a Service.

// WebappPodSpec is a pod of containers of the webapp image, never pulled; it needs no service
// account token and no service links.
func WebappPodSpec(containers ...corev1.Container) corev1.PodSpec {
	no := false
	return corev1.PodSpec{AutomountServiceAccountToken: &no, EnableServiceLinks: &no, Containers: containers}
}

// WebappContainer is a container of the webapp image run with args, told its pod's and node's
// names (the downward API, as the webapp chart does).
func WebappContainer(image, name string, args ...string) corev1.Container {
	field := func(env, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: env, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	return corev1.Container{Name: name, Image: image, ImagePullPolicy: corev1.PullNever, Args: args,
		Env: []corev1.EnvVar{field("POD_NAME", "metadata.name"), field("NODE_NAME", "spec.nodeName")}}
}

// AnsweredBy is the pod of pods (by name) an answer of webapp ("hello from POD on NODE") comes
// from, nil when the line is no such answer or names a pod of pods on another node.
func AnsweredBy(line string, pods map[string]*corev1.Pod) *corev1.Pod {
	rest, ok := strings.CutPrefix(line, "hello from ")
	pod, node, ok2 := strings.Cut(rest, " on ")
	if p := pods[pod]; ok && ok2 && p != nil && p.Spec.NodeName == node {
		return p
	}
	return nil
}

// RunPod runs a pod named name in namespace ns of containers (WebappPodSpec), on node, until it
// succeeds, and returns each container's output lines, read from the pod's logs (the API
// server asks the kubelet).
func RunPod(t testing.TB, cs kubernetes.Interface, ns, name, node string, containers ...corev1.Container) map[string][]string {
	t.Helper()
	ctx := t.Context()
	spec := WebappPodSpec(containers...)
	spec.RestartPolicy = corev1.RestartPolicyNever
	spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
	start := time.Now()
	pod, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 2*time.Minute, "pod "+name+": Succeeded", func() (bool, string) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		pod = p
		return p.Status.Phase == corev1.PodSucceeded, PodState(p)
	})
	t.Logf("pod %s created to Succeeded on %s: %s", name, pod.Spec.NodeName, time.Since(start).Round(time.Millisecond))
	logs := map[string][]string{}
	for _, c := range containers {
		raw, err := cs.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{Container: c.Name}).DoRaw(ctx)
		if err != nil {
			t.Fatalf("logs of pod %s, container %s (API server → kubelet on %s): %v", name, c.Name, pod.Spec.NodeName, err)
		}
		logs[c.Name] = strings.Split(strings.TrimSpace(string(raw)), "\n")
	}
	return logs
}

// hostLoop is a shell loop run on a host until a file says stop: the output of its runs, for
// a test to read once stopped.
type hostLoop struct {
	t        testing.TB
	h        *Host
	stopFile string
	done     chan hostLoopDone
}

type hostLoopDone struct {
	out []byte
	err error
}

// startHostLoop runs script on h with "$1" the stop file (which the script removes first, and
// polls), and its other arguments args.
func startHostLoop(t testing.TB, h *Host, stopFile, script string, args ...string) *hostLoop {
	l := &hostLoop{t: t, h: h, stopFile: stopFile, done: make(chan hostLoopDone, 1)}
	go func() {
		out, err := h.Exec(t.Context(), append([]string{"sh", "-c", script, "loop", stopFile}, args...)...)
		l.done <- hostLoopDone{out, err}
	}()
	return l
}

// stop stops the loop and returns the lines it wrote.
func (l *hostLoop) stop() []string {
	l.t.Helper()
	if _, err := l.h.Exec(l.t.Context(), "touch", l.stopFile); err != nil {
		l.t.Fatal(err)
	}
	var d hostLoopDone
	select {
	case d = <-l.done:
	case <-time.After(30 * time.Second):
		l.t.Fatalf("the loop on %s did not stop", l.h.Name)
	}
	if d.err != nil {
		l.t.Fatalf("loop on %s: %v", l.h.Name, d.err)
	}
	return strings.Split(strings.TrimSpace(string(d.out)), "\n")
}

// Requests are HTTP requests a host makes, each on a new connection, every 100 ms until
// stopped: a client of a Service through a patch, say.
type Requests struct{ loop *hostLoop }

// StartRequests starts requesting url from host h: curl writes each answer's status code; for a
// request not answered 200, the time it was made comes first, then curl's error, then the code.
func StartRequests(t testing.TB, h *Host, url string) *Requests {
	const script = `rm -f "$1"
while [ ! -e "$1" ]; do
	at=$(date -u +%T.%3N)
	out=$(curl -sS -o /dev/null -w '%{http_code}\n' --max-time 2 "$2" 2>&1) || true
	if [ "$out" != 200 ]; then echo "at $at"; fi
	echo "$out"
	sleep 0.1
done`
	return &Requests{startHostLoop(t, h, "/run/edgefleet-test-requests.stop", script, url)}
}

// Stop stops the requests and returns how many were answered 200 OK, and the others: when each
// was made, curl's error and the status code ("at 10:04:05.120: curl: (7) …: 000").
func (r *Requests) Stop() (answered int, failed []string) {
	r.loop.t.Helper()
	var errs []string // curl's, before the code of the request they belong to
	for _, line := range r.loop.stop() {
		switch {
		case line == "200":
			answered++
		case len(line) == 3 && strings.Trim(line, "0123456789") == "":
			failed = append(failed, strings.Join(append(errs, line), ": "))
			errs = nil
		default:
			errs = append(errs, line)
		}
	}
	return answered, failed
}

// EtcdSamples sample, on a control-plane host of the real node stack, the cluster's etcd
// members and how many of them answer healthy, every 2 s until stopped.
type EtcdSamples struct{ loop *hostLoop }

// EtcdSample is one look at the etcd cluster: how many members its member list has, and how
// many of those answered their /health with "true". Unhealthy names each other member and
// what it answered (the body) or curl's exit code (28: no answer within 3 s), the evidence a
// failed check shows; empty when all were healthy.
type EtcdSample struct {
	Members, Healthy int
	Unhealthy        string
}

// StartEtcdSamples starts sampling the etcd cluster from control-plane host h: the member list
// from the local member, then each member's /health at its client URL, with the member's own
// serving-and-client certificate.
func StartEtcdSamples(t testing.TB, h *Host) *EtcdSamples {
	const script = `rm -f "$1"
pki=/etc/kubernetes/pki/etcd
c() { curl -sS --max-time 3 --cacert $pki/ca.crt --cert $pki/server.crt --key $pki/server.key "$@"; }
while [ ! -e "$1" ]; do
	urls=$(c -X POST -d '{}' https://127.0.0.1:2379/v3/cluster/member/list 2>/dev/null | grep -o '"clientURLs":\["[^"]*"' | sed 's/.*\["//; s/"$//')
	n=0; healthy=0; why=
	for u in $urls; do
		n=$((n+1))
		body=$(c "$u/health" 2>/dev/null); rc=$?
		case $body in
		*'"health":"true"'*) healthy=$((healthy+1)) ;;
		*) why="$why $u=$(printf 'curl-exit-%s:%s' "$rc" "$body" | tr -d ' \n')" ;;
		esac
	done
	echo "$n $healthy$why"
	sleep 2
done`
	return &EtcdSamples{startHostLoop(t, h, "/run/edgefleet-test-etcd-samples.stop", script)}
}

// Stop stops the sampling and returns the samples, in order.
func (s *EtcdSamples) Stop() []EtcdSample {
	s.loop.t.Helper()
	var out []EtcdSample
	for _, line := range s.loop.stop() {
		var e EtcdSample
		f := strings.Fields(line)
		if _, err := fmt.Sscanf(line, "%d %d", &e.Members, &e.Healthy); err != nil || len(f) < 2 {
			s.loop.t.Fatalf("etcd sample %q from %s: %v", line, s.loop.h.Name, err)
		}
		e.Unhealthy = strings.Join(f[2:], " ")
		out = append(out, e)
	}
	return out
}
