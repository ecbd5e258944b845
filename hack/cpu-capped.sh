#!/usr/bin/env bash
# cpu-capped.sh CORES NAME CMD [ARG...]: runs CMD in a cgroup NAME of its own whose processes
# together use at most CORES of the machine's CPUs (a CFS quota: cgroup v1's cpu controller, or
# cgroup2's cpu.max), at a normal weight, and removes the cgroup after CMD exits. make test runs
# its qemu lane so (see the Makefile). Without a cpu controller it can write (not root, or a
# cgroup tree it may not change), it says so and runs CMD uncapped. Exits with CMD's status.
set -euo pipefail
if (($# < 3)); then
	echo "usage: $0 CORES NAME CMD [ARG...]" >&2
	exit 2
fi
cores=$1 name=$2
shift 2
period=100000
if ! quota=$(awk -v c="$cores" -v p="$period" 'BEGIN { if (c !~ /^[0-9]+(\.[0-9]+)?$/ || c <= 0) exit 1; printf "%d", c * p }'); then
	echo "$0: CORES must be a positive number of cores, like 1 or 1.5, not \"$cores\"" >&2
	exit 2
fi

# root is the cgroup (v1 cpu hierarchy or cgroup2 tree) the capped cgroup goes under, and max
# the file its quota goes to; empty when there is none to write.
root= max=
if [[ -w /sys/fs/cgroup/cpu/cgroup.procs && -e /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]]; then
	root=/sys/fs/cgroup/cpu max=cpu.cfs_quota_us
elif [[ -w /sys/fs/cgroup/cgroup.subtree_control ]] && grep -qw cpu /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
	root=/sys/fs/cgroup max=cpu.max
	grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control || echo +cpu >/sys/fs/cgroup/cgroup.subtree_control
fi
if [[ -z $root ]]; then
	echo "$0: no cpu cgroup controller to write here; running $1 without a CPU cap" >&2
	exec "$@"
fi

dir=$root/$name
mkdir -p "$dir"
if [[ $max == cpu.max ]]; then
	echo "$quota $period" >"$dir/cpu.max"
else
	echo "$period" >"$dir/cpu.cfs_period_us"
	echo "$quota" >"$dir/cpu.cfs_quota_us"
fi
echo $$ >"$dir/cgroup.procs"
status=0
"$@" || status=$?
echo $$ >"$root/cgroup.procs"
if ! rmdir "$dir" 2>/dev/null; then
	echo "$0: cgroup $dir still has processes after $1 exited: $(tr '\n' ' ' <"$dir/cgroup.procs")" >&2
	((status)) || status=1
fi
exit "$status"
