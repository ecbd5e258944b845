package testhosts

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupHierarchy is one cgroup hierarchy mounted under /sys/fs/cgroup on this machine.
type cgroupHierarchy struct {
	// name is its directory under /sys/fs/cgroup ("memory", "cpu,cpuacct", "systemd",
	// "unified"), "." for a cgroup2 tree mounted at /sys/fs/cgroup itself.
	name string
	// mountpoint is where the machine mounts it.
	mountpoint string
	// v2 is true for the cgroup2 tree.
	v2 bool
	// options name a v1 hierarchy to mount(2): its controllers ("cpu", "cpu,cpuacct") or
	// "none,name=systemd".
	options string
}

// cgroupLayout is the machine's cgroup layout, which every test host gets too, rooted at a
// cgroup of its own in each hierarchy: on a unified machine the cgroup2 tree; on a hybrid one
// (these machines) every v1 hierarchy — where the cpu, memory and pids controllers are, which
// kubelet and runc need — and the "unified" cgroup2 tree, which systemd uses in hybrid mode.
type cgroupLayout struct {
	hierarchies []cgroupHierarchy
	// links are the symlinks of /sys/fs/cgroup ("cpu" → "cpu,cpuacct" on machines that
	// mount the two together).
	links map[string]string
}

// cgroupSuperMagic is CGROUP2_SUPER_MAGIC of statfs(2).
const cgroupSuperMagic = 0x63677270

// readCgroupLayout reads the machine's cgroup hierarchies from /proc/self/mountinfo.
func readCgroupLayout() (cgroupLayout, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs("/sys/fs/cgroup", &st); err != nil {
		return cgroupLayout{}, fmt.Errorf("test hosts: cgroups: %w", err)
	}
	if st.Type == cgroupSuperMagic {
		return cgroupLayout{hierarchies: []cgroupHierarchy{{name: ".", mountpoint: "/sys/fs/cgroup", v2: true}}}, nil
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return cgroupLayout{}, fmt.Errorf("test hosts: cgroups: %w", err)
	}
	defer f.Close()
	l := cgroupLayout{links: map[string]string{}}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if len(fields) < 5 || len(tail) < 3 || filepath.Dir(fields[4]) != "/sys/fs/cgroup" {
			continue
		}
		if fields[3] != "/" {
			return cgroupLayout{}, fmt.Errorf("test hosts: cgroups: %s is mounted from %s, not its hierarchy's root", fields[4], fields[3])
		}
		h := cgroupHierarchy{name: filepath.Base(fields[4]), mountpoint: fields[4]}
		switch tail[0] {
		case "cgroup2":
			h.v2 = true
		case "cgroup":
			var opts []string
			named := false
			for _, o := range strings.Split(tail[2], ",") {
				switch {
				case o == "rw" || o == "ro" || strings.HasPrefix(o, "release_agent="):
				default:
					named = named || strings.HasPrefix(o, "name=")
					opts = append(opts, o)
				}
			}
			if named && len(opts) == 1 {
				opts = append([]string{"none"}, opts...)
			}
			h.options = strings.Join(opts, ",")
		default:
			continue
		}
		l.hierarchies = append(l.hierarchies, h)
	}
	if err := sc.Err(); err != nil {
		return cgroupLayout{}, fmt.Errorf("test hosts: cgroups: %w", err)
	}
	if len(l.hierarchies) == 0 {
		return cgroupLayout{}, errors.New("test hosts: no cgroup hierarchy under /sys/fs/cgroup")
	}
	entries, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		return cgroupLayout{}, fmt.Errorf("test hosts: cgroups: %w", err)
	}
	for _, e := range entries {
		if e.Type()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(filepath.Join("/sys/fs/cgroup", e.Name()))
			if err != nil {
				return cgroupLayout{}, fmt.Errorf("test hosts: cgroups: %w", err)
			}
			l.links[e.Name()] = target
		}
	}
	return l, nil
}

// dirs returns the cgroup rel (a path below each hierarchy's root) in every hierarchy.
func (l cgroupLayout) dirs(rel string) []string {
	dirs := make([]string, 0, len(l.hierarchies))
	for _, h := range l.hierarchies {
		dirs = append(dirs, filepath.Join(h.mountpoint, rel))
	}
	return dirs
}

// v2Dir returns the cgroup rel in the cgroup2 tree, "" when the machine has none.
func (l cgroupLayout) v2Dir(rel string) string {
	for _, h := range l.hierarchies {
		if h.v2 {
			return filepath.Join(h.mountpoint, rel)
		}
	}
	return ""
}

// makeDirs makes the cgroup parent/name in every hierarchy. A v1 cpuset cgroup takes no process
// before it has CPUs and memory nodes: parent copies its parent's and has cgroup.clone_children
// set, so that every cgroup below it (the host's, and those its systemd, kubelet and runc make)
// starts with them.
//
// The parent's CPU weight is that of one busy process per host it holds (hostCPUShares): the
// test harness runs in the root cgroup, where each of its threads weighs as much as the whole
// group. Left at the default, all hosts together got the CPU of one thread of the harness; on
// a loaded 2-core machine a host's pods missed their 1 s readiness probes, and requests to
// them timed out, while nothing was happening to that host.
func (l cgroupLayout) makeDirs(parent, name string) error {
	for _, h := range l.hierarchies {
		p := filepath.Join(h.mountpoint, parent)
		if err := os.MkdirAll(filepath.Join(p, name), 0o755); err != nil {
			return fmt.Errorf("cgroup: %w", err)
		}
		if err := weighHosts(h, p); err != nil {
			return err
		}
		if h.v2 || !strings.Contains(","+h.options+",", ",cpuset,") {
			continue
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if err := copyCgroupFile(filepath.Join(h.mountpoint, f), filepath.Join(p, f)); err != nil {
				return err
			}
			if err := copyCgroupFile(filepath.Join(p, f), filepath.Join(p, name, f)); err != nil {
				return err
			}
		}
		if err := os.WriteFile(filepath.Join(p, "cgroup.clone_children"), []byte("1"), 0o644); err != nil {
			return fmt.Errorf("cgroup: %w", err)
		}
	}
	return nil
}

// hostCPUShares and hostCPUWeight are the CPU weight, per host, of the hosts' parent cgroup:
// a v1 cpu.shares (1024 is one process's) and the cgroup2 cpu.weight it maps to (100).
const (
	hostCPUShares = 1024
	hostCPUWeight = 100
)

// weighHosts sets the CPU weight of parent, in hierarchy h, to hostCPUShares (or
// hostCPUWeight) per host cgroup below it. Hierarchies without the cpu controller are left as
// they are.
func weighHosts(h cgroupHierarchy, parent string) error {
	file, per, limit := "cpu.shares", hostCPUShares, 262144
	if h.v2 {
		file, per, limit = "cpu.weight", hostCPUWeight, 10000
	}
	if !fileExists(filepath.Join(parent, file)) {
		return nil
	}
	entries, err := os.ReadDir(parent)
	if err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	hosts := 0
	for _, e := range entries {
		if e.IsDir() {
			hosts++
		}
	}
	if err := os.WriteFile(filepath.Join(parent, file), []byte(strconv.Itoa(min(limit, per*max(1, hosts)))), 0o644); err != nil {
		return fmt.Errorf("cgroup: weigh the test hosts: %w", err)
	}
	return nil
}

// copyCgroupFile writes from's value into to unless to has one already.
func copyCgroupFile(from, to string) error {
	cur, err := os.ReadFile(to)
	if err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	if strings.TrimSpace(string(cur)) != "" {
		return nil
	}
	v, err := os.ReadFile(from)
	if err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	if err := os.WriteFile(to, v, 0o644); err != nil {
		return fmt.Errorf("cgroup: write %s: %w", to, err)
	}
	return nil
}

// mountSpec is the boot script's list of what to mount under the host's /sys/fs/cgroup, one
// "kind name options" line each: a tmpfs at /sys/fs/cgroup (unless the cgroup2 tree is mounted
// there), then each hierarchy, then the symlinks.
func (l cgroupLayout) mountSpec() string {
	var b strings.Builder
	if len(l.hierarchies) != 1 || l.hierarchies[0].name != "." {
		b.WriteString("tmpfs . -\n")
	}
	for _, h := range l.hierarchies {
		if h.v2 {
			fmt.Fprintf(&b, "cgroup2 %s -\n", h.name)
		} else {
			fmt.Fprintf(&b, "cgroup %s %s\n", h.name, h.options)
		}
	}
	for name, target := range l.links {
		fmt.Fprintf(&b, "link %s %s\n", name, target)
	}
	return b.String()
}

// removeStaleCgroups removes the cgroups of hosts of killed test runs under parent: those whose
// cgroup2 tree holds no process ("populated 0"), older than a minute so that a host starting now
// is left alone, in every hierarchy. A running host's tree is never touched, not even its empty
// leaves. Without a cgroup2 tree nothing is removed.
func (l cgroupLayout) removeStaleCgroups(parent string) {
	root := l.v2Dir(parent)
	if root == "" {
		return
	}
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		events, err := os.ReadFile(filepath.Join(root, e.Name(), "cgroup.events"))
		if err != nil || !strings.Contains(string(events), "populated 0") {
			continue
		}
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > time.Minute {
			for _, d := range l.dirs(filepath.Join(parent, e.Name())) {
				_ = removeCgroupTree(d)
			}
		}
	}
}

// removeCgroupTree removes a cgroup and its children, deepest first; it fails while any holds
// a process. A missing cgroup is removed already.
func removeCgroupTree(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := removeCgroupTree(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	if err := syscall.Rmdir(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("rmdir %s: %w", dir, err)
	}
	return nil
}
