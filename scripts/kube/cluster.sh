#!/usr/bin/env bash
# cluster.sh — a real single-node Kubernetes cluster on this machine, for
# corral's Kubernetes backend and its tests, made from the Go module proxy and
# Debian's packages only: kube-apiserver, kube-controller-manager,
# kube-scheduler, kubelet and kubectl built from k8s.io/kubernetes (the wrapper
# module in scripts/kube/kbuild), Debian's etcd, containerd (a private instance
# with CRI on: its own socket, root and state; Docker's containerd is never
# touched) and CNI plugins, and a pause image built here. Nothing is pulled.
# agent-sandbox (sigs.k8s.io/agent-sandbox, pinned by the wrapper module in
# scripts/kube/sandboxctl) is installed on it: its CRDs (Sandbox; SandboxTemplate,
# SandboxClaim, SandboxWarmPool) and its controller, extensions on, run as a
# host process with the admin kubeconfig like the other components.
#
# Usage: scripts/kube/cluster.sh COMMAND
#   build            build the Kubernetes binaries and agent-sandbox's controller into
#                    the cache (once per version: about 10 minutes cold on 2 cores,
#                    nothing when cached)
#   up               install what is missing, build, start the cluster, wait until
#                    its node is Ready, install agent-sandbox's CRDs and start its
#                    controller; prints the KUBECONFIG to use. Idempotent (on a
#                    cluster already up, it adds agent-sandbox when missing).
#   load IMAGE...    copy images from the Docker engine into the cluster's containerd
#                    (pods must use imagePullPolicy Never or IfNotPresent)
#   down             stop everything `up` started and undo its host changes
#                    (processes, mounts, network links and namespaces, iptables
#                    chains, cgroups, sysctls); safe to run twice
#   status           say whether the cluster answers
#   env              print `export KUBECONFIG=...`
#   run CMD...       up, run CMD with KUBECONFIG set, then down (always)
#
# Environment:
#   CORRAL_KUBE_VERSION  Kubernetes version (default v1.34.4: the newest minor that
#                        supports containerd 1.x and cgroup v1, as this host has)
#   CORRAL_AGENT_SANDBOX_VERSION  agent-sandbox version (default v0.2.1, as
#                        scripts/kube/sandboxctl/go.mod pins it)
#   CORRAL_KUBE_CACHE    where built binaries are kept (default /var/cache/corral-kube)
#   CORRAL_KUBE_STATE    the cluster's state: certificates, etcd, containerd, kubelet,
#                        logs (default /var/lib/corral-kube)
#
# Needs root. Every address is local: the API server, etcd and the components'
# health ports on 127.0.0.1, the kubelet on 198.18.0.1 (a bridge with no ports
# that this script makes), pods on an isolated bridge with no route anywhere.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
prog=cluster.sh

VERSION=${CORRAL_KUBE_VERSION:-v1.34.4}
CACHE=${CORRAL_KUBE_CACHE:-/var/cache/corral-kube}
STATE=${CORRAL_KUBE_STATE:-/var/lib/corral-kube}
BIN=$CACHE/$VERSION/bin
AS_VERSION=${CORRAL_AGENT_SANDBOX_VERSION:-v0.2.1}
AS_DIR=$CACHE/agent-sandbox-$AS_VERSION # bin/agent-sandbox-controller, crds/*.yaml
PKI=$STATE/pki
LOGS=$STATE/log
PIDS=$STATE/pids
SOCK=$STATE/containerd/containerd.sock
export KUBECONFIG=$PKI/admin.kubeconfig

readonly NODE=corral-node
readonly NODE_IP=198.18.0.1 # on NODE_BRIDGE, which has no ports: local only
readonly NODE_BRIDGE=corralk0
readonly POD_BRIDGE=corralk-pods
readonly POD_CIDR=198.18.32.0/24
readonly SVC_CIDR=198.18.16.0/24 SVC_IP=198.18.16.1
readonly API_PORT=16443
readonly ETCD_CLIENT=127.0.0.1:23790 ETCD_PEER=127.0.0.1:23800 ETCD_METRICS=127.0.0.1:23810
readonly AS_HEALTH=127.0.0.1:23830 # agent-sandbox's controller: /readyz (no metrics server)
readonly PAUSE_IMAGE=localhost/corral-pause:1
readonly SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
	kernel.keys.root_maxkeys kernel.keys.root_maxbytes)

t0=$(date +%s)
say() { printf '%s: [%ss] %s\n' "$prog" "$(($(date +%s) - t0))" "$*" >&2; }
die() {
	say "error: $*"
	exit 1
}

need_root() {
	(($(id -u) == 0)) || die "this needs root (it starts containerd and a kubelet): run it as root, or with sudo"
}

go_toolchain() {
	if ! command -v go >/dev/null 2>&1 && [[ -x /usr/local/go/bin/go ]]; then
		export PATH=$PATH:/usr/local/go/bin
	fi
	command -v go >/dev/null 2>&1 || die "go is not installed: it builds the Kubernetes binaries"
}

# --- build ---------------------------------------------------------------------------

build() {
	if [[ -x $BIN/kubelet && -x $BIN/kubectl && -x $BIN/kube-apiserver ]]; then
		say "Kubernetes $VERSION binaries in $BIN"
		return
	fi
	go_toolchain
	local minor=${VERSION#v1.} ld="-s -w" p tmp=$BIN.tmp.$$
	minor=${minor%%.*}
	grep -q "k8s.io/kubernetes $VERSION\$" "$here/kbuild/go.mod" ||
		die "scripts/kube/kbuild/go.mod pins another Kubernetes than $VERSION: regenerate it for that version"
	for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ld+=" -X $p.gitVersion=$VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
	done
	say "building Kubernetes $VERSION (once; about 10 minutes on 2 cores when nothing is cached)"
	mkdir -p "$tmp"
	(cd "$here/kbuild" && CGO_ENABLED=0 GOFLAGS=-mod=readonly go build -trimpath -ldflags "$ld" -o "$tmp/" \
		k8s.io/kubernetes/cmd/kube-apiserver \
		k8s.io/kubernetes/cmd/kube-controller-manager \
		k8s.io/kubernetes/cmd/kube-scheduler \
		k8s.io/kubernetes/cmd/kubelet \
		k8s.io/kubernetes/cmd/kubectl) || {
		rm -rf "$tmp"
		die "building Kubernetes failed (see above)"
	}
	rm -rf "$BIN"
	mv "$tmp" "$BIN"
	say "built into $BIN"
}

# build_sandbox builds agent-sandbox's controller from the pinned module and
# keeps its CRDs beside it: once per version (controller-runtime and client-go:
# 105 s cold on 2 idle cores, 180 CPU-seconds; nothing when cached).
build_sandbox() {
	if [[ -x $AS_DIR/bin/agent-sandbox-controller && -s $AS_DIR/crds/extensions.agents.x-k8s.io_sandboxwarmpools.yaml ]]; then
		say "agent-sandbox $AS_VERSION in $AS_DIR"
		return
	fi
	go_toolchain
	local mod=$here/sandboxctl tmp=$AS_DIR.tmp.$$ src
	grep -q "sigs.k8s.io/agent-sandbox $AS_VERSION\$" "$mod/go.mod" ||
		die "scripts/kube/sandboxctl/go.mod pins another agent-sandbox than $AS_VERSION: regenerate it for that version"
	say "building agent-sandbox $AS_VERSION's controller (once)"
	mkdir -p "$tmp/bin" "$tmp/crds"
	(cd "$mod" && CGO_ENABLED=0 GOFLAGS=-mod=readonly go build -trimpath -ldflags "-s -w" -o "$tmp/bin/" \
		sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller) &&
		src=$(cd "$mod" && GOFLAGS=-mod=readonly go list -m -f '{{.Dir}}' sigs.k8s.io/agent-sandbox) &&
		cp "$src"/k8s/crds/*.yaml "$tmp/crds/" || {
		rm -rf "$tmp"
		die "building agent-sandbox's controller failed (see above)"
	}
	chmod -R u+w "$tmp"
	rm -rf "$AS_DIR"
	mv "$tmp" "$AS_DIR"
	say "built into $AS_DIR"
}

# --- images --------------------------------------------------------------------------

ctr_() { ctr -a "$SOCK" -n k8s.io "$@"; }

pause_image() {
	if docker image inspect "$PAUSE_IMAGE" >/dev/null 2>&1; then
		return
	fi
	local d
	d=$(mktemp -d)
	gcc -static -Os -s -o "$d/pause" "$here/pause/pause.c"
	printf 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n' >"$d/Dockerfile"
	docker build -q -t "$PAUSE_IMAGE" "$d" >/dev/null
	rm -rf "$d"
}

load() {
	local img id ref rec
	mkdir -p "$STATE/images"
	for img in "$@"; do
		id=$(docker image inspect -f '{{.Id}}' "$img" 2>/dev/null) ||
			die "no image $img in the Docker engine: build it first (make image for corral/dev:bookworm)"
		ref=$(normal "$img")
		# What was loaded under each name is recorded: a name whose image did not
		# change since is not loaded again.
		rec=$STATE/images/$(printf '%s' "$ref" | tr '/:' '__')
		if [[ -f $rec && $(cat "$rec") == "$id" ]] && ctr_ images ls -q 2>/dev/null | grep -qxF "$ref"; then
			continue
		fi
		say "loading $img into the cluster"
		docker save "$img" | ctr_ images import --no-unpack=false - >/dev/null ||
			die "could not import $img into the cluster's containerd"
		echo "$id" >"$rec"
	done
}

# normal gives an image reference as containerd names it (docker.io/library/x:latest).
normal() {
	local r=$1
	[[ $r == *:* && ${r##*/} == *:* ]] || r=$r:latest
	case ${r%%/*} in
	*.* | *:* | localhost) ;;
	*) [[ $r == */* ]] && r=docker.io/$r || r=docker.io/library/$r ;;
	esac
	echo "$r"
}

# --- certificates --------------------------------------------------------------------

pki() {
	if openssl x509 -checkend 86400 -noout -in "$PKI/ca.crt" >/dev/null 2>&1; then
		return
	fi
	rm -rf "$PKI"
	mkdir -p "$PKI"
	(
		cd "$PKI"
		key() { openssl ecparam -name prime256v1 -genkey -noout -out "$1.key" 2>/dev/null; }
		cert() { # NAME SUBJECT EKU [SAN]
			key "$1"
			openssl req -new -key "$1.key" -subj "$2" -out "$1.csr" 2>/dev/null
			{
				echo "basicConstraints=CA:FALSE"
				echo "keyUsage=critical,digitalSignature,keyEncipherment"
				echo "extendedKeyUsage=$3"
				[[ -z ${4:-} ]] || echo "subjectAltName=$4"
			} >"$1.ext"
			openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 7 \
				-extfile "$1.ext" -out "$1.crt" 2>/dev/null
			rm -f "$1.csr" "$1.ext"
		}
		key ca
		openssl req -x509 -new -key ca.key -subj "/CN=corral-test-ca" -days 7 -out ca.crt \
			-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
		cert apiserver "/CN=kube-apiserver" serverAuth \
			"IP:127.0.0.1,IP:$NODE_IP,IP:$SVC_IP,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
		cert kubelet-serving "/CN=$NODE" serverAuth "IP:$NODE_IP,DNS:$NODE"
		cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
		cert admin "/O=system:masters/CN=corral-admin" clientAuth
		cert kubelet "/O=system:nodes/CN=system:node:$NODE" clientAuth
		cert scheduler "/CN=system:kube-scheduler" clientAuth
		cert controller-manager "/CN=system:kube-controller-manager" clientAuth
		key sa
		openssl ec -in sa.key -pubout -out sa.pub 2>/dev/null
		chmod 600 ./*.key
		for u in admin kubelet scheduler controller-manager; do
			kubeconfig "$u" >"$u.kubeconfig"
		done
	)
}

# kubeconfig NAME writes a kubeconfig for the client certificate NAME.crt.
kubeconfig() {
	cat <<EOF
apiVersion: v1
kind: Config
clusters:
- name: corral
  cluster: {server: "https://127.0.0.1:$API_PORT", certificate-authority: "$PKI/ca.crt"}
users:
- name: $1
  user: {client-certificate: "$PKI/$1.crt", client-key: "$PKI/$1.key"}
contexts:
- name: corral
  context: {cluster: corral, user: $1}
current-context: corral
EOF
}

# --- processes -----------------------------------------------------------------------

start() { # NAME CMD...
	local n=$1
	shift
	setsid "$@" >"$LOGS/$n.log" 2>&1 </dev/null &
	echo "$n $!" >>"$PIDS"
}

pid_of() { awk -v n="$1" '$1==n{print $2}' "$PIDS" 2>/dev/null | tail -1; }

running() { # NAME
	local p
	p=$(pid_of "$1")
	[[ -n $p ]] && kill -0 "$p" 2>/dev/null
}

wait_for() { # WHAT SECONDS CMD...
	local what=$1 n=$2 i
	shift 2
	for ((i = 0; i < n; i++)); do
		if "$@" >/dev/null 2>&1; then
			return 0
		fi
		sleep 1
	done
	die "$what not ready after ${n}s (logs in $LOGS)"
}

kubectl_() { "$BIN/kubectl" "$@"; }

status() { [[ -x $BIN/kubectl ]] && kubectl_ get --raw /readyz >/dev/null 2>&1; }

# --- up --------------------------------------------------------------------------------

up() {
	need_root
	bash "$repo/scripts/setup.sh" --kube
	build
	build_sandbox
	if status && running kubelet; then
		agent_sandbox
		say "the cluster is up; export KUBECONFIG=$KUBECONFIG"
		return
	fi
	down >/dev/null 2>&1 || true
	mkdir -p "$STATE" "$LOGS" "$STATE/containerd" "$STATE/kubelet" "$STATE/pod-logs" "$STATE/cni/net.d" "$STATE/cni/data" "$STATE/etcd"
	: >"$PIDS"
	# What the kubelet changes on the host, so that down can put it back.
	sysctl -n "${SYSCTLS[@]}" >"$STATE/sysctl.saved"
	local ipt t
	for ipt in iptables ip6tables; do
		for t in filter mangle nat; do
			$ipt -t $t -S 2>/dev/null | awk -v p="$ipt/$t/" '$1=="-N"{print p $2}'
		done
	done >"$STATE/iptables.before"
	ip netns list 2>/dev/null | awk '{print $1}' >"$STATE/netns.before"
	pki
	ip link show "$NODE_BRIDGE" >/dev/null 2>&1 || ip link add "$NODE_BRIDGE" type bridge
	ip addr replace "$NODE_IP/32" dev "$NODE_BRIDGE"
	ip link set "$NODE_BRIDGE" up

	start etcd etcd --name corral --data-dir "$STATE/etcd" \
		--listen-client-urls "http://$ETCD_CLIENT" --advertise-client-urls "http://$ETCD_CLIENT" \
		--listen-peer-urls "http://$ETCD_PEER" --initial-advertise-peer-urls "http://$ETCD_PEER" \
		--initial-cluster "corral=http://$ETCD_PEER" --listen-metrics-urls "http://$ETCD_METRICS" \
		--unsafe-no-fsync

	containerd_config >"$STATE/containerd/config.toml"
	cni_config >"$STATE/cni/net.d/10-corral.conflist"
	start containerd containerd --config "$STATE/containerd/config.toml"
	wait_for containerd 30 ctr -a "$SOCK" version
	pause_image
	load "$PAUSE_IMAGE"
	wait_for etcd 30 curl -fsS "http://$ETCD_CLIENT/health"

	start kube-apiserver "$BIN/kube-apiserver" \
		--etcd-servers="http://$ETCD_CLIENT" \
		--bind-address=127.0.0.1 --secure-port=$API_PORT --advertise-address=$NODE_IP \
		--tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
		--client-ca-file="$PKI/ca.crt" \
		--kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" \
		--kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
		--kubelet-certificate-authority="$PKI/ca.crt" \
		--kubelet-preferred-address-types=InternalIP \
		--service-account-issuer=https://kubernetes.default.svc.cluster.local \
		--service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
		--service-cluster-ip-range=$SVC_CIDR \
		--authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
		--profiling=false
	wait_for kube-apiserver 120 kubectl_ get --raw /readyz

	start kube-controller-manager "$BIN/kube-controller-manager" \
		--kubeconfig="$PKI/controller-manager.kubeconfig" \
		--authentication-kubeconfig="$PKI/controller-manager.kubeconfig" \
		--authorization-kubeconfig="$PKI/controller-manager.kubeconfig" \
		--bind-address=127.0.0.1 --leader-elect=false \
		--service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
		--cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
		--use-service-account-credentials=true --allocate-node-cidrs=false \
		--controllers='*,-nodeipam,-service-lb-controller,-cloud-node-lifecycle-controller' \
		--profiling=false
	start kube-scheduler "$BIN/kube-scheduler" \
		--kubeconfig="$PKI/scheduler.kubeconfig" \
		--authentication-kubeconfig="$PKI/scheduler.kubeconfig" \
		--authorization-kubeconfig="$PKI/scheduler.kubeconfig" \
		--bind-address=127.0.0.1 --leader-elect=false --profiling=false

	kubelet_config >"$STATE/kubelet/config.yaml"
	start kubelet "$BIN/kubelet" --config="$STATE/kubelet/config.yaml" \
		--kubeconfig="$PKI/kubelet.kubeconfig" --root-dir="$STATE/kubelet" \
		--hostname-override=$NODE --node-ip=$NODE_IP --v=1
	wait_for "the node" 120 node_ready
	wait_for "the default service account" 60 kubectl_ -n default get serviceaccount default
	agent_sandbox
	say "the cluster is up; export KUBECONFIG=$KUBECONFIG"
}

# agent_sandbox installs agent-sandbox's CRDs and starts its controller (with
# the extensions: templates, claims, warm pools), unless it runs.
agent_sandbox() {
	if running agent-sandbox-controller && curl -fsS "http://$AS_HEALTH/readyz" >/dev/null 2>&1; then
		return
	fi
	stop agent-sandbox-controller
	# Server-side: the CRDs of Sandbox and SandboxTemplate hold a whole pod
	# spec's schema, too big for apply's last-applied annotation.
	kubectl_ apply --server-side --force-conflicts -f "$AS_DIR/crds/" >/dev/null ||
		die "could not install agent-sandbox's CRDs"
	kubectl_ wait --for condition=established --timeout=60s -f "$AS_DIR/crds/" >/dev/null ||
		die "agent-sandbox's CRDs were not established within 60s"
	start agent-sandbox-controller "$AS_DIR/bin/agent-sandbox-controller" \
		--kubeconfig="$PKI/admin.kubeconfig" --extensions --leader-elect=false \
		--metrics-bind-address=0 --health-probe-bind-address=$AS_HEALTH
	wait_for "agent-sandbox's controller" 60 curl -fsS "http://$AS_HEALTH/readyz"
	say "agent-sandbox $AS_VERSION: CRDs installed, controller running"
}

node_ready() {
	[[ $(kubectl_ get node $NODE -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}') == True ]]
}

containerd_config() {
	cat <<EOF
version = 2
root = "$STATE/containerd/root"
state = "$STATE/containerd/state"
[grpc]
  address = "$SOCK"
[ttrpc]
  address = ""
[debug]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$STATE/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  # This machine's root may lack CAP_SYS_RESOURCE: the pause container's
  # oom_score_adj of -998 would be refused.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "$(command -v runc)"
        Root = "$STATE/containerd/runc-root"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$STATE/cni/net.d"
EOF
}

cni_config() {
	cat <<EOF
{
  "cniVersion": "1.0.0",
  "name": "corral",
  "plugins": [
    {"type": "bridge", "bridge": "$POD_BRIDGE", "isGateway": false, "ipMasq": false,
     "ipam": {"type": "host-local", "dataDir": "$STATE/cni/data", "ranges": [[{"subnet": "$POD_CIDR"}]]}}
  ]
}
EOF
}

kubelet_config() {
	cat <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: $PKI/kubelet-serving.crt
tlsPrivateKeyFile: $PKI/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$SOCK
failSwapOn: false
failCgroupV1: false
podLogsDir: $STATE/pod-logs
resolvConf: /etc/resolv.conf
enableProfilingHandler: false
enableDebuggingHandlers: true
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
rotateCertificates: false
serverTLSBootstrap: false
EOF
}

# --- down ------------------------------------------------------------------------------

stop() { # NAME
	local p i
	p=$(pid_of "$1")
	[[ -n $p ]] || return 0
	kill "$p" 2>/dev/null || return 0
	for ((i = 0; i < 20; i++)); do
		kill -0 "$p" 2>/dev/null || return 0
		sleep 0.5
	done
	kill -9 "$p" 2>/dev/null || true
}

down() {
	need_root
	# First, so that no warm pool refills while its pods are deleted.
	stop agent-sandbox-controller
	if status; then
		kubectl_ delete pods --all -A --grace-period=0 --force --wait=false >/dev/null 2>&1 || true
		local i
		for ((i = 0; i < 30; i++)); do
			[[ -z $(ctr_ tasks ls -q 2>/dev/null) ]] && break
			sleep 1
		done
	fi
	stop kubelet
	if [[ -S $SOCK ]]; then
		local t c
		for t in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks kill -s SIGKILL "$t" >/dev/null 2>&1 || true; done
		sleep 1
		for t in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks delete -f "$t" >/dev/null 2>&1 || true; done
		for c in $(ctr_ containers ls -q 2>/dev/null); do ctr_ containers delete "$c" >/dev/null 2>&1 || true; done
	fi
	stop kube-scheduler
	stop kube-controller-manager
	stop kube-apiserver
	stop containerd
	stop etcd
	# Shims of our containerd that outlived it.
	local p
	for p in $(pgrep -f "containerd-shim-runc-v2 .*-address $SOCK" || true); do kill -9 "$p" 2>/dev/null || true; done
	# Mounts under the state directory (pod volumes, root filesystems, shm).
	findmnt -rn -o TARGET | grep "^$STATE/" | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
	# Network namespaces the pods' CNI made (those that were not there before
	# up), the two bridges.
	local ns
	for ns in $(ip netns list 2>/dev/null | awk '/^cni-/{print $1}'); do
		grep -qxF "$ns" "$STATE/netns.before" 2>/dev/null || ip netns del "$ns" 2>/dev/null || true
	done
	ip link del "$POD_BRIDGE" 2>/dev/null || true
	ip link del "$NODE_BRIDGE" 2>/dev/null || true
	# Empty cgroups the kubelet made.
	local h
	for h in /sys/fs/cgroup/*/; do
		[[ -d $h/kubepods ]] && find "$h/kubepods" -depth -type d -exec rmdir {} \; 2>/dev/null || true
	done
	# iptables chains the kubelet added, and the jumps to them; only chains that
	# were not there before up.
	local before ipt tb chain rule
	before=$(cat "$STATE/iptables.before" 2>/dev/null || true)
	for ipt in iptables ip6tables; do
		for tb in filter mangle nat; do
			for chain in $($ipt -t $tb -S 2>/dev/null | awk '$1=="-N" && $2 ~ /^KUBE-/ {print $2}'); do
				grep -qxF "$ipt/$tb/$chain" <<<"$before" && continue
				$ipt -t $tb -S 2>/dev/null | awk -v c="$chain" '$1=="-A" && $2!=c { for (i=1;i<=NF;i++) if ($i=="-j" && $(i+1)==c) { print; break } }' |
					while read -r rule; do
						# shellcheck disable=SC2086 # the rule is words
						$ipt -t $tb ${rule/-A /-D } 2>/dev/null || true
					done
				$ipt -t $tb -F "$chain" 2>/dev/null || true
				$ipt -t $tb -X "$chain" 2>/dev/null || true
			done
		done
	done
	# Kernel settings the kubelet changed.
	if [[ -s $STATE/sysctl.saved ]]; then
		local v i=0 k
		mapfile -t v <"$STATE/sysctl.saved"
		for k in "${SYSCTLS[@]}"; do
			sysctl -q -w "$k=${v[i]}" 2>/dev/null || true
			i=$((i + 1))
		done
		rm -f "$STATE/sysctl.saved"
	fi
	rm -rf "$STATE/etcd" "$STATE/kubelet" "$STATE/pod-logs" "$STATE/cni" "$STATE/containerd/state" "$STATE/containerd/runc-root"
	: >"$PIDS" 2>/dev/null || true
	say "the cluster is down"
}

# --- main ------------------------------------------------------------------------------

case ${1:-} in
build)
	build
	build_sandbox
	;;
up) up ;;
down) down ;;
load)
	shift
	(($#)) || die "load needs an image"
	[[ -S $SOCK ]] || die "the cluster is not up: run $prog up first"
	load "$@"
	;;
status)
	if status; then say "the cluster answers at https://127.0.0.1:$API_PORT (KUBECONFIG=$KUBECONFIG)"; else
		say "the cluster does not answer"
		exit 1
	fi
	;;
env) echo "export KUBECONFIG=$KUBECONFIG" ;;
run)
	shift
	(($#)) || die "run needs a command"
	trap down EXIT
	up
	"$@"
	;;
-h | --help | help | '') sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" ;;
*) die "unknown command $1 (see --help)" ;;
esac
