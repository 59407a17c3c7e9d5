#!/usr/bin/env bash
# build.sh — builds corral's default sandbox image (corral/dev:bookworm, from
# images/dev/Dockerfile) with docker build, showing its progress.
#
# The base image (debian:bookworm-slim unless --base) comes from the local engine when
# it is there, else from `docker pull`. When it cannot be pulled (no registry, as on
# an offline machine) and it is Debian bookworm, the base is bootstrapped with
# `debootstrap --variant=minbase bookworm` from Debian's mirror, slimmed like Debian's
# slim images, imported with `docker import` as corral/base:bookworm, and the build
# runs FROM it. The import is kept: later builds reuse it (remove it with
# `docker rmi corral/base:bookworm` to bootstrap afresh).
#
# The image carries the label corral.image.hash, a hash of this script, the files of
# images/dev and the base asked for. When the image exists with the current hash the
# script does nothing (in well under a second) unless --force.
#
# corral embeds this directory (package images) and runs this script for
# `corral image build`: it must work from a copy outside the source tree.
set -euo pipefail

prog=build.sh
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

readonly DEFAULT_NAME=corral/dev:bookworm
readonly DEFAULT_BASE=debian:bookworm-slim
readonly BOOT_SUITE=bookworm
readonly BOOT_IMAGE=corral/base:bookworm
readonly IMAGE_DIR=dev
readonly STD_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# Exit status of --check when the image is missing or out of date.
readonly EXIT_STALE=3

usage() {
	cat <<EOF
Usage: $prog [--name NAME] [--base IMAGE] [--force] [--check]

Builds corral's sandbox image from images/$IMAGE_DIR/Dockerfile with docker build.

  --name NAME    tag of the image to build (default $DEFAULT_NAME)
  --base IMAGE   base image to build FROM (default $DEFAULT_BASE, or \$CORRAL_BASE_IMAGE).
                 Used from the local engine, else pulled; a Debian bookworm base that
                 cannot be pulled is bootstrapped with debootstrap as $BOOT_IMAGE
                 (needs root, or sudo, and the debootstrap package).
  --force        rebuild even if the image is up to date, without the layer cache, and
                 try to pull a newer base first
  --check        build nothing: exit 0 if the image is up to date, $EXIT_STALE if it is
                 missing or out of date
  -h, --help     show this help

Environment: DOCKER_BUILDKIT=0|1 forces the legacy builder or BuildKit (default:
BuildKit when the buildx plugin is installed, else the legacy builder);
TMPDIR is where debootstrap's root filesystem is made (default /var/tmp).
EOF
}

say() { printf '%s: %s\n' "$prog" "$*" >&2; }
die() {
	say "error: $*"
	exit 1
}

name=$DEFAULT_NAME
base=${CORRAL_BASE_IMAGE:-$DEFAULT_BASE}
force=0
check=0
while (($#)); do
	case $1 in
	--name)
		(($# >= 2)) || die "--name needs a value, e.g. --name $DEFAULT_NAME"
		name=$2
		shift 2
		;;
	--name=*)
		name=${1#*=}
		shift
		;;
	--base)
		(($# >= 2)) || die "--base needs a value, e.g. --base $DEFAULT_BASE"
		base=$2
		shift 2
		;;
	--base=*)
		base=${1#*=}
		shift
		;;
	--force)
		force=1
		shift
		;;
	--check)
		check=1
		shift
		;;
	-h | --help)
		usage
		exit 0
		;;
	*) die "unknown argument '$1' (see $prog --help)" ;;
	esac
done
[[ -n $name ]] || die "--name is empty"
[[ -n $base ]] || die "--base is empty"
[[ -f $here/$IMAGE_DIR/Dockerfile ]] || die "$here/$IMAGE_DIR/Dockerfile is missing"

# --- the Docker engine -------------------------------------------------------------

command -v docker >/dev/null 2>&1 ||
	die "the docker CLI is not installed: install Docker (on Debian: apt-get install docker.io) and run again"
if ! out=$(docker version --format '{{.Server.Version}}' 2>&1); then
	die "cannot reach the Docker engine (${out##*$'\n'}): start it (e.g. systemctl start docker, or dockerd &), or point DOCKER_HOST at it"
fi

have_image() { docker image inspect --format '{{.Id}}' "$1" >/dev/null 2>&1; }

# --- is the image up to date? ------------------------------------------------------

sha256() {
	if command -v sha256sum >/dev/null 2>&1; then sha256sum "$@"; else shasum -a 256 "$@"; fi
}
# The hash covers what the image is made from: paths are relative to this directory,
# so a copy elsewhere (corral's embedded one) hashes the same.
hash=$(
	cd "$here"
	{
		find "$IMAGE_DIR" -type f -print | LC_ALL=C sort | while IFS= read -r f; do sha256 "$f"; done
		sha256 build.sh
		printf 'base %s\n' "$base"
	} | sha256 | cut -d' ' -f1
)

image_hash() {
	docker image inspect --format '{{index .Config.Labels "corral.image.hash"}}' "$1" 2>/dev/null || true
}

up_to_date() { [[ $(image_hash "$name") == "$hash" ]]; }

if ((check)); then
	if up_to_date; then
		say "$name is up to date"
		exit 0
	fi
	if have_image "$name"; then
		say "$name is out of date: build it with \`corral image build\` or \`make image\`"
	else
		say "$name is not built: build it with \`corral image build\` or \`make image\`"
	fi
	exit $EXIT_STALE
fi

if ((!force)) && up_to_date; then
	say "$name is up to date (corral.image.hash ${hash:0:12}); --force rebuilds it"
	exit 0
fi

# One build at a time on this machine: a second waits, then finds the image built.
lock=${TMPDIR:-/tmp}/corral-image-build.lock
if command -v flock >/dev/null 2>&1 && { exec 9>>"$lock"; } 2>/dev/null; then
	if ! flock -n 9; then
		say "another image build is running; waiting for it to finish"
		flock 9
		if ((!force)) && up_to_date; then
			say "$name is up to date (built meanwhile)"
			exit 0
		fi
	fi
fi

# --- cleanup and signals -----------------------------------------------------------

sudo=()
child=
work=
cleanup() {
	if [[ -n $child ]]; then kill "$child" 2>/dev/null || true; fi
	if [[ -n $work && -d $work ]]; then
		# debootstrap unmounts what it mounted (proc, sys, ...) unless it was killed:
		# unmount whatever is left before removing the tree.
		local m
		while IFS= read -r m; do
			${sudo[@]+"${sudo[@]}"} umount -l "$m" 2>/dev/null || true
		done < <(awk -v w="$work/" 'index($2, w) == 1 { print $2 }' /proc/mounts 2>/dev/null | sort -r)
		${sudo[@]+"${sudo[@]}"} rm -rf --one-file-system "$work" || say "warning: could not remove $work"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# run runs a command in the background and waits for it, so that a signal to this
# script is handled at once (and the command killed) rather than after it ends.
run() {
	local rc=0
	"$@" &
	child=$!
	wait "$child" || rc=$?
	child=
	return "$rc"
}

# --- the base image ----------------------------------------------------------------

is_bootstrappable() {
	case $1 in
	debian:bookworm-slim | debian:bookworm | debian:12-slim | debian:12 | "$BOOT_IMAGE") return 0 ;;
	*) return 1 ;;
	esac
}

bootstrap_base() {
	command -v debootstrap >/dev/null 2>&1 ||
		die "$base cannot be pulled, and debootstrap, which would bootstrap it from Debian's mirror, is not installed: install it (Debian, Ubuntu: apt-get install debootstrap) and run again"
	if ((EUID != 0)); then
		command -v sudo >/dev/null 2>&1 ||
			die "$base cannot be pulled, and debootstrap, which would bootstrap it, needs root: run this as root, or install sudo"
		sudo=(sudo)
		say "debootstrap needs root: running it with sudo"
	fi
	[[ -r /usr/share/keyrings/debian-archive-keyring.gpg ]] ||
		die "debootstrap needs Debian's archive keyring to check what it downloads: install debian-archive-keyring"

	work=$(mktemp -d "${TMPDIR:-/var/tmp}/corral-rootfs.XXXXXX")
	local rootfs=$work/rootfs
	say "$base cannot be pulled: bootstrapping Debian $BOOT_SUITE with debootstrap into $rootfs (a minute or two)"
	run ${sudo[@]+"${sudo[@]}"} debootstrap --variant=minbase "$BOOT_SUITE" "$rootfs"

	# Slim it as Debian's slim images are: no docs (but copyrights), manuals,
	# translations, downloaded packages or package lists; dpkg keeps it so. The host's
	# resolv.conf and hostname that debootstrap copied go: the engine provides its own.
	# bookworm-updates comes from the mirror debootstrap used.
	say "slimming the root filesystem"
	# shellcheck disable=SC2016 # expanded by the inner shell
	${sudo[@]+"${sudo[@]}"} bash -euc '
		r=$1 suite=$2
		cp "$3" "$r/etc/dpkg/dpkg.cfg.d/corral-slim"
		find "$r/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
		find "$r/usr/share/doc" -mindepth 1 -type d -empty -delete
		for d in groff info linda lintian locale man; do
			if [[ -d $r/usr/share/$d ]]; then find "$r/usr/share/$d" -mindepth 1 -delete; fi
		done
		rm -rf "$r"/var/cache/apt/archives/*.deb "$r"/var/cache/apt/*.bin "$r"/var/lib/apt/lists/*
		rm -f "$r"/var/log/dpkg.log "$r"/var/log/bootstrap.log "$r"/var/log/alternatives.log
		rm -rf "$r"/var/log/apt/*
		: >"$r/etc/resolv.conf"
		: >"$r/etc/hostname"
		url=$(sed -n "s|^deb \([^ ]*\) $suite main\$|\1|p" "$r/etc/apt/sources.list" | head -n 1)
		if [[ -n $url ]] && ! grep -q " $suite-updates " "$r/etc/apt/sources.list"; then
			echo "deb $url $suite-updates main" >>"$r/etc/apt/sources.list"
		fi
	' slim "$rootfs" "$BOOT_SUITE" "$here/$IMAGE_DIR/dpkg-slim.cfg"

	say "importing the root filesystem as $BOOT_IMAGE"
	${sudo[@]+"${sudo[@]}"} tar --numeric-owner -C "$rootfs" -c . |
		docker import \
			--change "ENV PATH=$STD_PATH" \
			--change 'CMD ["bash"]' \
			--change "LABEL corral.image.role=base org.opencontainers.image.title=$BOOT_IMAGE org.opencontainers.image.description=\"debootstrap --variant=minbase $BOOT_SUITE, slimmed\" org.opencontainers.image.created=$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
			--message "debootstrap --variant=minbase $BOOT_SUITE by corral's images/build.sh" \
			- "$BOOT_IMAGE" >/dev/null
	cleanup
	work=
	say "bootstrapped $BOOT_IMAGE in ${SECONDS}s ($(docker image inspect --format '{{.Size}}' "$BOOT_IMAGE" | awk '{ printf "%d MB", $1 / 1e6 }'))"
}

# resolve_base sets from to the image the build starts from.
from=
resolve_base() {
	if ((!force)) && have_image "$base"; then
		from=$base
		return
	fi
	if [[ $base != "$BOOT_IMAGE" ]]; then
		say "pulling $base"
		if run docker pull "$base"; then
			from=$base
			return
		fi
		if have_image "$base"; then
			say "could not pull $base: using the local one"
			from=$base
			return
		fi
		is_bootstrappable "$base" ||
			die "base image $base is not on this engine and cannot be pulled: pull, load or build it, or pass --base IMAGE"
	fi
	if have_image "$BOOT_IMAGE"; then
		say "$base cannot be pulled: using $BOOT_IMAGE, bootstrapped earlier with debootstrap"
	else
		bootstrap_base
	fi
	from=$BOOT_IMAGE
}

# --- the build ---------------------------------------------------------------------

if [[ -z ${DOCKER_BUILDKIT:-} ]]; then
	if docker buildx version >/dev/null 2>&1; then
		export DOCKER_BUILDKIT=1
	else
		# The CLI's own fallback says the same; being explicit also keeps a
		# DOCKER_BUILDKIT=1 environment from failing where buildx is missing.
		export DOCKER_BUILDKIT=0
		say "docker buildx is not installed: building with the legacy builder"
	fi
fi

resolve_base

# The build date is a --label, not in the Dockerfile, so that it does not invalidate
# the layer cache (and replaces the date the base's label gives).
args=(build --tag "$name" --build-arg "BASE=$from" --build-arg "CORRAL_IMAGE_HASH=$hash"
	--label "org.opencontainers.image.created=$(date -u +%Y-%m-%dT%H:%M:%SZ)")
if ((force)); then args+=(--no-cache); fi
old_id=$(docker image inspect --format '{{.Id}}' "$name" 2>/dev/null || true)
say "building $name FROM $from"
run docker "${args[@]}" "$here/$IMAGE_DIR"

# The image this one replaces is left without a name: remove it, unless a container
# or another tag still uses it (docker refuses then, and that is fine).
if [[ -n $old_id && $old_id != "$(docker image inspect --format '{{.Id}}' "$name")" ]]; then
	docker rmi "$old_id" >/dev/null 2>&1 || true
fi

size=$(docker image inspect --format '{{.Size}}' "$name" | awk '{ printf "%d MB", $1 / 1e6 }')
say "built $name in ${SECONDS}s ($size, corral.image.hash ${hash:0:12})"
