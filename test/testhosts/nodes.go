package testhosts

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// PodState is a pod's name, phase, node, unmet conditions and containers' states, for messages.
func PodState(pod *corev1.Pod) string {
	states := []string{fmt.Sprintf("%s: phase %s on %q", pod.Name, pod.Status.Phase, pod.Spec.NodeName)}
	for _, cond := range pod.Status.Conditions {
		if cond.Status != corev1.ConditionTrue && cond.Message != "" {
			states = append(states, fmt.Sprintf("%s: %s", cond.Type, cond.Message))
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		states = append(states, fmt.Sprintf("%s: %+v", cs.Name, cs.State))
	}
	return strings.Join(states, ", ")
}

// OutsideServer serves HTTP on the hosts' gateway, off any cluster the hosts run: it answers
// "outside, from <the caller's address>\n", so a test sees whether pods' requests leave their
// node masqueraded. It stops when the test ends; the URL is returned.
func (hn *HostNet) OutsideServer(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(hn.Gateway.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		fmt.Fprintf(w, "outside, from %s\n", host)
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + l.Addr().String() + "/"
}
