# rdmadoctor: the agent (DaemonSet), `preflight` (init container or command prefix) and `collect`
# in one image. Build it with `scripts/build-image.sh [TAG]` (podman or docker), or by hand:
#   docker build -t ghcr.io/rdmadoctor/rdmadoctor:0.1.0 .
# The tag follows rdmadoctor/__init__.py's __version__ (deploy/ manifests use the same one).
#
# BASE: any Debian bookworm image with python3 and its venv module. The default is the usual
# registry image; scripts/build-image.sh passes a bookworm root it made with mmdebstrap when that
# registry cannot be reached. The same file both ways: what the tests run is what users build.
# A release pins it by digest: .github/workflows/release.yml resolves the tag to its multi-arch
# index digest once and passes BASE=...@sha256:..., so both architectures and the provenance
# attestation name the same bytes.
ARG BASE=docker.io/library/python:3.11-slim-bookworm

# ---- build: rdmadoctor and its dependencies in a virtualenv at /opt/rdmadoctor ------------------
FROM ${BASE} AS build
# pip's own settings, for a builder behind a mirror: scripts/build-image.sh passes the builder's
# pip configuration here (empty: pip's default index). They live in this stage only, so none of
# them reaches the image. A CA bundle for the mirror comes in as the secret "pip-cert".
ARG PIP_INDEX_URL=
ARG PIP_EXTRA_INDEX_URL=
ARG PIP_TRUSTED_HOST=
WORKDIR /src
COPY . .
# [k8s]: lightkube, for --publish node and --conditions (deploy/overlays/direct*); the /metrics
# client (prometheus-client) is a base dependency. Every dependency, and the setuptools that builds
# rdmadoctor, comes from image-requirements.txt with its sha256 (--require-hashes, wheels only):
# a file that changed on the index, or a version nobody locked, fails the build. rdmadoctor itself
# is then built from this context with no dependency resolution. pip and setuptools are removed afterwards:
# nothing in the image installs Python packages at run time. pip compiles every module to .pyc
# here, so the read-only root filesystem costs the agent no start-up time.
RUN --mount=type=secret,id=pip-cert \
    set -eu; \
    if [ -s /run/secrets/pip-cert ]; then export PIP_CERT=/run/secrets/pip-cert; fi; \
    [ -n "$PIP_INDEX_URL" ] || unset PIP_INDEX_URL; \
    [ -n "$PIP_EXTRA_INDEX_URL" ] || unset PIP_EXTRA_INDEX_URL; \
    [ -n "$PIP_TRUSTED_HOST" ] || unset PIP_TRUSTED_HOST; \
    python3 -m venv /opt/rdmadoctor; \
    /opt/rdmadoctor/bin/pip install --no-cache-dir --disable-pip-version-check --require-hashes --only-binary=:all: \
        -r image-requirements.txt; \
    /opt/rdmadoctor/bin/pip install --no-cache-dir --disable-pip-version-check --no-deps --no-build-isolation ".[k8s]"; \
    /opt/rdmadoctor/bin/pip check --disable-pip-version-check; \
    /opt/rdmadoctor/bin/pip uninstall -y --disable-pip-version-check pip setuptools; \
    /opt/rdmadoctor/bin/rdmadoctor --version

# ---- runtime -------------------------------------------------------------------------------
FROM ${BASE}

# The rdma-core userspace, so that `verbs.userspace` passes in the image and `collect` records
# real tool outputs (ibstat, ibv_devinfo, lspci -vvv):
#   libibverbs1, ibverbs-providers  libibverbs and the provider plugins (mlx5, efa, bnxt_re ...)
#   librdmacm1, libibumad3          RDMA CM and umad (the checks' recommended_packages)
#   ibverbs-utils                   ibv_devinfo, ibv_devices
#   infiniband-diags                ibstat, ibstatus, iblinkinfo, perfquery
#   perftest                        ib_write_bw ... (in recommended_packages: a pod proves the fabric)
#   pciutils                        lspci (PCIe link width/speed, ACS)
# (infiniband-diags depends on perl for its scripts: about 50 MB of the image.)
# Not the `rdma-core` binary package: on Debian it is udev rules, systemd units and rdma-ndd
# (it pulls in udev), all for a host, none of any use in a container.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libibverbs1 ibverbs-providers librdmacm1 libibumad3 \
      ibverbs-utils infiniband-diags perftest pciutils \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/*

COPY --from=build /opt/rdmadoctor /opt/rdmadoctor
# Apache-2.0 asks that the licence travel with the work: where Debian keeps every package's.
COPY LICENSE /usr/share/doc/rdmadoctor/LICENSE

# The root filesystem is read-only in the pods: no .pyc writes, unbuffered logs to stderr.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH="/opt/rdmadoctor/bin:${PATH}"

LABEL org.opencontainers.image.title="rdmadoctor" \
      org.opencontainers.image.description="Is this GPU node, and the pod on it, ready to train over RDMA?" \
      org.opencontainers.image.licenses="Apache-2.0"

# The DaemonSet's uid/gid (deploy/base/daemonset.yaml: runAsUser/runAsGroup 9470). Numeric, so
# the kubelet can verify runAsNonRoot without an /etc/passwd entry.
USER 9470:9470

ENTRYPOINT ["rdmadoctor"]
CMD ["--help"]
