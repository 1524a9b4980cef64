#!/usr/bin/env bash
# Builds the rdmadoctor image from ./Dockerfile and prints the image reference on its last line.
#
#   scripts/build-image.sh [TAG] [--arch amd64|arm64] [--base auto|registry|local|IMAGE]
#                                [--engine podman|docker]
#
# TAG      default ghcr.io/rdmadoctor/rdmadoctor:<version in rdmadoctor/__init__.py>
# --arch   the image's architecture (default: this machine's). Another one runs through qemu:
#          `apt-get install qemu-user-static arch-test`, with binfmt_misc mounted
#          (`mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc` where it is not).
# --base   auto (default): the Dockerfile's registry base (python:3.11-slim-bookworm) when it is
#          present or can be pulled, else a Debian bookworm root made here with mmdebstrap
#          (`apt-get install mmdebstrap`) and imported as localhost/rdmadoctor-base:...;
#          registry / local force one of the two; anything else is used as the base image.
# --engine podman if installed, else docker (its daemon must answer); or $RDMADOCTOR_ENGINE.
#
# pip inside the build reaches Python packages the way pip on this machine does: the index
# settings of `pip config list` (and PIP_INDEX_URL, PIP_EXTRA_INDEX_URL, PIP_TRUSTED_HOST) go in
# as build arguments and pip's CA bundle (`cert`, PIP_CERT) as the build secret "pip-cert";
# local file:// indexes are left out (a build cannot see them). Nothing of it lands in the image.
# The build runs with --network host, so apt and pip inside it use this machine's network.
#
# podman: when CONTAINERS_CONF is unset and this machine needs it, a temporary containers.conf
# is used: runc and cgroupfs on a cgroup v1 (or hybrid) host, where crun and the systemd cgroup
# manager fail; `default_ulimits = []` where this process cannot raise RLIMIT_NOFILE (podman
# raises it in every container by default, and the container then fails to start).
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "build-image.sh: $*" >&2; exit 2; }
say() { echo "build-image.sh: $*" >&2; }

REGISTRY_BASE=docker.io/library/python:3.11-slim-bookworm
VERSION=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' rdmadoctor/__init__.py)
[ -n "$VERSION" ] || die "no __version__ in rdmadoctor/__init__.py"

tag="" arch="" base=auto engine=${RDMADOCTOR_ENGINE:-}
while [ $# -gt 0 ]; do
    case "$1" in
        --arch) arch=${2:?--arch needs a value: amd64 or arm64}; shift 2 ;;
        --arch=*) arch=${1#*=}; shift ;;
        --base) base=${2:?--base needs a value: auto, registry, local or an image}; shift 2 ;;
        --base=*) base=${1#*=}; shift ;;
        --engine) engine=${2:?--engine needs a value: podman or docker}; shift 2 ;;
        --engine=*) engine=${1#*=}; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        -*) die "unknown option $1 (see --help)" ;;
        *) [ -z "$tag" ] || die "one TAG only, got '$tag' and '$1'"; tag=$1; shift ;;
    esac
done
tag=${tag:-ghcr.io/rdmadoctor/rdmadoctor:$VERSION}

native=$(dpkg --print-architecture 2>/dev/null || true)
if [ -z "$native" ]; then
    case "$(uname -m)" in x86_64) native=amd64 ;; aarch64|arm64) native=arm64 ;; *) native=$(uname -m) ;; esac
fi
arch=${arch:-$native}
case "$arch" in amd64|arm64) ;; *) die "--arch $arch: expected amd64 or arm64" ;; esac

# ---- the engine ---------------------------------------------------------------------------------
if [ -z "$engine" ]; then
    if command -v podman >/dev/null; then engine=podman
    elif command -v docker >/dev/null && docker info >/dev/null 2>&1; then engine=docker
    else die "neither podman nor a running docker: apt-get install podman (or start dockerd)"; fi
fi
command -v "$engine" >/dev/null || die "$engine is not installed"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ "$engine" = podman ] && [ -z "${CONTAINERS_CONF:-}" ]; then
    conf=""
    if [ ! -e /sys/fs/cgroup/cgroup.controllers ] && command -v runc >/dev/null; then
        conf+=$'[engine]\nruntime = "runc"\ncgroup_manager = "cgroupfs"\n'
    fi
    if ! (ulimit -Hn 1048576) 2>/dev/null; then
        conf=$'[containers]\ndefault_ulimits = []\n'"$conf"
    fi
    if [ -n "$conf" ]; then
        printf '%s' "$conf" >"$tmp/containers.conf"
        export CONTAINERS_CONF="$tmp/containers.conf"
        say "podman settings for this machine: $(tr '\n' ' ' <"$tmp/containers.conf")"
    fi
fi

image_exists() {
    if [ "$engine" = podman ]; then podman image exists "$1"; else docker image inspect "$1" >/dev/null 2>&1; fi
}

# ---- the base ---------------------------------------------------------------------------------
# The bookworm root: what python:3.11-slim-bookworm holds that the Dockerfile uses (python3 with
# venv, CA certificates, apt), with Debian's slim-image dpkg filters (no manuals, docs, locales;
# they stay in force for the Dockerfile's apt-get). The tag carries a hash of this recipe.
LOCAL_PACKAGES=python3,python3-venv,ca-certificates
DPKG_FILTERS=(path-exclude=/usr/share/man/* path-exclude=/usr/share/doc/* path-include=/usr/share/doc/*/copyright
              path-exclude=/usr/share/locale/* path-exclude=/usr/share/info/*)
ENV_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

local_base() {
    local recipe hash ref
    recipe="bookworm minbase $arch $LOCAL_PACKAGES ${DPKG_FILTERS[*]} $ENV_PATH"
    hash=$(printf '%s' "$recipe" | sha256sum | cut -c1-12)
    ref=localhost/rdmadoctor-base:bookworm-$arch-$hash
    if image_exists "$ref"; then
        say "base: $ref (made earlier)"
    else
        command -v mmdebstrap >/dev/null || die "the registry base cannot be had and mmdebstrap is not installed: apt-get install mmdebstrap"
        say "base: making a Debian bookworm root with mmdebstrap ($arch)"
        local opts=()
        for f in "${DPKG_FILTERS[@]}"; do opts+=(--dpkgopt="$f"); done
        mmdebstrap --variant=minbase --arch="$arch" --include="$LOCAL_PACKAGES" \
            --aptopt='APT::Install-Recommends "false"' "${opts[@]}" \
            bookworm "$tmp/base.tar" >&2 || die "mmdebstrap failed (see above)"
        # The root's architecture goes into the image's metadata, or a cross build looks for it
        # in a registry.
        local platform=(--arch "$arch")
        [ "$engine" = podman ] || platform=(--platform "linux/$arch")
        "$engine" import "${platform[@]}" --change "ENV PATH=$ENV_PATH" --change "ENV LANG=C.UTF-8" \
            "$tmp/base.tar" "$ref" >&2 || die "$engine import failed"
        rm -f "$tmp/base.tar"
    fi
    BASE_REF=$ref
}

case "$base" in
    registry) BASE_REF=$REGISTRY_BASE ;;
    local) local_base ;;
    auto)
        if image_exists "$REGISTRY_BASE" || "$engine" pull --platform "linux/$arch" "$REGISTRY_BASE" >/dev/null 2>&1; then
            BASE_REF=$REGISTRY_BASE
            say "base: $REGISTRY_BASE"
        else
            say "base: $REGISTRY_BASE cannot be pulled; using a local bookworm root instead"
            local_base
        fi ;;
    *) BASE_REF=$base ;;
esac

# ---- pip's settings, passed through --------------------------------------------------------------
build_args=(--build-arg "BASE=$BASE_REF")
secrets=()
pip_setting() {  # the first value of KEY in `pip config list` (any section), else ""
    [ -n "$pip_conf" ] || return 0
    printf '%s\n' "$pip_conf" | sed -n "s/^[^=]*\.$1='\(.*\)'\$/\1/p" | head -1
}
pip_conf=""
for py in python3 python; do
    if command -v "$py" >/dev/null && pip_conf=$("$py" -m pip config list 2>/dev/null); then break; fi
    pip_conf=""
done
net_urls() {  # keep http(s) URLs only: a file:// index on this machine is not in the build
    local out=() u
    for u in $1; do case "$u" in http://*|https://*) out+=("$u") ;; esac; done
    echo "${out[*]:-}"
}
index=$(net_urls "${PIP_INDEX_URL:-$(pip_setting index-url)}")
extra=$(net_urls "${PIP_EXTRA_INDEX_URL:-$(pip_setting extra-index-url)}")
trusted=${PIP_TRUSTED_HOST:-$(pip_setting trusted-host)}
cert=${PIP_CERT:-$(pip_setting cert)}
[ -z "$index" ] || build_args+=(--build-arg "PIP_INDEX_URL=$index")
[ -z "$extra" ] || build_args+=(--build-arg "PIP_EXTRA_INDEX_URL=$extra")
[ -z "$trusted" ] || build_args+=(--build-arg "PIP_TRUSTED_HOST=$trusted")
if [ -n "$cert" ] && [ -f "$cert" ]; then
    secrets+=(--secret "id=pip-cert,src=$cert")
fi

# ---- build ----------------------------------------------------------------------------------------
say "building $tag ($arch, base $BASE_REF) with $engine"
if [ "$engine" = docker ]; then export DOCKER_BUILDKIT=1; fi
"$engine" build --network host --platform "linux/$arch" -f Dockerfile \
    "${build_args[@]}" "${secrets[@]}" -t "$tag" . >&2 || die "$engine build failed (see above)"

if [ "$engine" = podman ]; then
    size=$(podman image inspect --format '{{.Size}}' "$tag" 2>/dev/null || echo "")
else
    size=$(docker image inspect --format '{{.Size}}' "$tag" 2>/dev/null || echo "")
fi
[ -z "$size" ] || say "built $tag: $((size / 1000000)) MB"
echo "$tag"
