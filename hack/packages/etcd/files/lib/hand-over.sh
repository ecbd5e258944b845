#!/bin/sh
# ExecStop of etcd.service: a member that leads hands the leadership to another started member
# before it stops, so that its restart (a patch, a certificate renewal) costs the others no
# election — they keep a leader and go on answering. Best effort and bounded (ctl's timeouts): a
# member alone, not leading, or whose peers do not take the leadership just stops.
set -u
PACKAGE_DIR=/opt/edgefleet/packages/etcd/current
. "$PACKAGE_DIR/files/lib/hooks.sh"
# endpoint status -w simple: endpoint, ID, version, storage version, db size, in use, percentage
# not in use, quota, is leader, ...
status=$(ctl https://127.0.0.1:2379 endpoint status -w simple 2>/dev/null) || exit 0
[ "$(echo "$status" | awk -F', ' '{print $9}')" = "true" ] || exit 0
here=$(echo "$status" | awk -F', ' '{print $2}')
# member list -w simple: ID, status, name, peer URLs, client URLs, is learner.
to=$(ctl https://127.0.0.1:2379 member list -w simple 2>/dev/null | awk -F', ' -v h="$here" '$1 != h && $2 == "started" && $6 == "false" {print $1; exit}')
[ -n "$to" ] || exit 0
ctl https://127.0.0.1:2379 move-leader "$to" >/dev/null 2>&1 || true
