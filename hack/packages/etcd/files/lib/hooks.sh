# Sourced by the etcd package's join and leave hooks and its unit's hand-over on stop (a package
# carries only the hooks its manifest names, so what they share is one of its files): etcdctl
# against endpoints, and host:port.
pki=/etc/kubernetes/pki/etcd

# hostport IP PORT: "IP:PORT", IPv6 in brackets.
hostport() {
	case $1 in
	*:*) echo "[$1]:$2" ;;
	*) echo "$1:$2" ;;
	esac
}

# ctl ENDPOINTS ARGS...: etcdctl with this member's certificate (client auth), bounded.
ctl() {
	endpoints=$1
	shift
	"$PACKAGE_DIR/files/bin/etcdctl" --endpoints="$endpoints" --cacert="$pki/ca.crt" --cert="$pki/server.crt" --key="$pki/server.key" \
		--dial-timeout=5s --command-timeout=20s "$@"
}

# reconfigure ENDPOINTS ARGS...: ctl for a membership change (member add, member remove),
# retried while etcd refuses it because a member has not been connected for a few seconds yet
# ("unhealthy cluster": a member that just started, or a host that just joined) — up to two
# minutes; prints etcdctl's answer.
reconfigure() {
	tries=0
	until out=$(ctl "$@" 2>&1); do
		tries=$((tries + 1))
		case $out in
		*"unhealthy cluster"*)
			if [ "$tries" -lt 60 ]; then
				sleep 2
				continue
			fi
			;;
		esac
		printf '%s\n' "$out" >&2
		return 1
	done
	printf '%s\n' "$out"
}
