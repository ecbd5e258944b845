# Shared by the etcd package's hooks (sourced): etcdctl against endpoints, and host:port.
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
