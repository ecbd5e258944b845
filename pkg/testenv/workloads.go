package testenv

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
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
	WaitFor(t, 2*time.Minute, "pod "+name+": Succeeded", func() (bool, string) {
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

// Requests are HTTP requests a host makes, each on a new connection, every 100 ms until
// stopped: a client of a Service through a patch, say.
type Requests struct {
	t    testing.TB
	h    *Host
	done chan requestsDone
}

type requestsDone struct {
	out []byte
	err error
}

// requestsStop is the file that stops the requests' loop in the host.
const requestsStop = "/run/edgefleet-test-requests.stop"

// StartRequests starts requesting url from host h: curl writes each answer's status code, after
// its error when there is no answer ("000").
func StartRequests(t testing.TB, h *Host, url string) *Requests {
	const loop = `rm -f "$1"
while [ ! -e "$1" ]; do
	curl -sS -o /dev/null -w '%{http_code}\n' --max-time 2 "$2" 2>&1 || true
	sleep 0.1
done`
	r := &Requests{t: t, h: h, done: make(chan requestsDone, 1)}
	go func() {
		out, err := h.Exec(t.Context(), "sh", "-c", loop, "requests", requestsStop, url)
		r.done <- requestsDone{out, err}
	}()
	return r
}

// Stop stops the requests and returns how many were answered 200 OK, and the others: their
// status codes, with curl's errors.
func (r *Requests) Stop() (answered int, failed []string) {
	r.t.Helper()
	if _, err := r.h.Exec(r.t.Context(), "touch", requestsStop); err != nil {
		r.t.Fatal(err)
	}
	var d requestsDone
	select {
	case d = <-r.done:
	case <-time.After(30 * time.Second):
		r.t.Fatalf("the requests from %s did not stop", r.h.Name)
	}
	if d.err != nil {
		r.t.Fatalf("requests from %s: %v", r.h.Name, d.err)
	}
	var errs []string // curl's, before the code of the request they belong to
	for _, line := range strings.Split(strings.TrimSpace(string(d.out)), "\n") {
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
