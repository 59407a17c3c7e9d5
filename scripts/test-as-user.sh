#!/usr/bin/env bash
# Runs the sandbox, tools and MCP integration tests a second time the way most
# people run corral: as an ordinary user in the docker group, not root, on a
# copy of the tree that user owns, with corral's state in that user's home.
# make test-user runs it (root is needed once, to make the user); CI runs it
# after make test.
#
#   CORRAL_TEST_USER   the account (default corral-ci; made when missing)
#   USER_TEST_PKGS     the packages (default below)
#   USER_TEST_RUN      a -run pattern for cmd/corral (default: the MCP tests)
set -euo pipefail
cd "$(dirname "$0")/.."

user=${CORRAL_TEST_USER:-corral-ci}
pkgs=${USER_TEST_PKGS:-"./sandbox ./sandbox/docker ./sandbox/agent ./sandbox/proto ./tools ./mcp"}
cli_run=${USER_TEST_RUN:-'^TestMCP'}

say() { printf 'test-as-user.sh: %s\n' "$*"; }

if [[ $EUID -ne 0 ]]; then
	say "run this as root: it makes the user $user (in the docker group) and runs the tests as that user"
	exit 2
fi
getent group docker >/dev/null || { say "no docker group: is the Docker engine installed? (make setup)"; exit 2; }
if ! id "$user" >/dev/null 2>&1; then
	say "making the user $user in the docker group"
	useradd --create-home --shell /bin/bash --groups docker "$user"
fi
id -nG "$user" | tr ' ' '\n' | grep -qx docker || usermod -aG docker "$user"
home=$(getent passwd "$user" | cut -d: -f6)
uid=$(id -u "$user")
[[ $uid -ne 0 ]] || { say "$user is root: pick an ordinary user"; exit 2; }

# The user's own copy of the tree (tracked and new files, as they are now):
# the tests build corral from it and read their testdata there.
src=$home/corral-src
rm -rf "$src"
mkdir -p "$src"
git ls-files -z --cached --others --exclude-standard |
	xargs -0 -I{} sh -c 'test -e "{}" && printf "%s\0" "{}"' |
	tar --null -T - -cf - | tar -xf - -C "$src"
chown -R "$user:" "$src"

go=$(command -v go || echo /usr/local/go/bin/go)
godir=$(dirname "$(readlink -f "$go")")

# Nothing of root's environment that names root's files: the user's own HOME,
# Go caches and state; no KUBECONFIG (the Kubernetes tests stay root's).
say "as $user (uid $uid): go test $pkgs; go test -run '$cli_run' ./cmd/corral"
runuser -u "$user" -- env -i \
	HOME="$home" USER="$user" LOGNAME="$user" \
	PATH="$godir:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin" \
	CI="${CI:-}" GOFLAGS="${GOFLAGS:-}" GOPROXY="${GOPROXY:-}" \
	LANG=C.UTF-8 TERM=dumb \
	bash -c "cd '$src'; id; rc=0; CGO_ENABLED=1 go test -count=1 -timeout 25m $pkgs || rc=1; CGO_ENABLED=1 go test -count=1 -timeout 15m -run '$cli_run' ./cmd/corral || rc=1; exit \$rc"
