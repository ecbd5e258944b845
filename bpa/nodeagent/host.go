package nodeagent

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// maxPods is the pod capacity reported, kubelet's default.
const maxPods = 110

// hostInfo is what the node reports about the machine it runs on.
type hostInfo struct {
	// internalIP is the InternalIP address; empty when there is none.
	internalIP string
	// capacity is the node's capacity, and its allocatable too (nothing is reserved).
	capacity corev1.ResourceList
}

// readHost reads the host's CPU count and memory, and its first global unicast IPv4 address
// unless nodeIP is given.
func readHost(nodeIP string) (hostInfo, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return hostInfo{}, fmt.Errorf("read host memory: %w", err)
	}
	defer f.Close() //nolint:errcheck // read only
	mem, err := parseMemTotal(f)
	if err != nil {
		return hostInfo{}, fmt.Errorf("read host memory from %s: %w", f.Name(), err)
	}
	h := hostInfo{
		internalIP: nodeIP,
		capacity: corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(mem, resource.BinarySI),
			corev1.ResourcePods:   *resource.NewQuantity(maxPods, resource.DecimalSI),
		},
	}
	if h.internalIP == "" {
		addrs, err := net.InterfaceAddrs()
		if err != nil {
			return hostInfo{}, fmt.Errorf("list the host's addresses: %w", err)
		}
		h.internalIP = firstIPv4(addrs)
	}
	return h, nil
}

// parseMemTotal returns the MemTotal of a /proc/meminfo, in bytes.
func parseMemTotal(r io.Reader) (int64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 || fields[0] != "MemTotal:" || fields[2] != "kB" {
			continue
		}
		kb, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil || kb <= 0 {
			return 0, fmt.Errorf("bad MemTotal %q", sc.Text())
		}
		return kb * 1024, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("no MemTotal line")
}

// firstIPv4 returns the first global unicast IPv4 address of addrs, or "".
func firstIPv4(addrs []net.Addr) string {
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			return n.IP.String()
		}
	}
	return ""
}
