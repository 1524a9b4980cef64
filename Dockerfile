# rdmadoctor: the agent (DaemonSet), `preflight` (init container) and `collect` in one image.
#   docker build -t ghcr.io/rdmadoctor/rdmadoctor:0.1.0 .
# The tag follows rdmadoctor/__init__.py's __version__ (deploy/ manifests use the same one).

# ---- build: a wheel from the source tree (setuptools from PyPI in pip's isolated build) ------
FROM python:3.11-slim-bookworm AS build
WORKDIR /src
COPY . .
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

# ---- runtime -------------------------------------------------------------------------------
FROM python:3.11-slim-bookworm

# The rdma-core userspace, so that `rdmadoctor collect` records real tool outputs (ibstat,
# ibv_devinfo, lspci -vvv) and pods can run perftest against the fabric:
#   libibverbs1, ibverbs-providers  libibverbs and the provider plugins (mlx5, efa, bnxt_re ...)
#   librdmacm1, libibumad3          RDMA CM and umad, for the tools below
#   ibverbs-utils                   ibv_devinfo, ibv_devices
#   infiniband-diags                ibstat, ibstatus, iblinkinfo, perfquery
#   perftest                        ib_write_bw, ib_read_lat ...
#   pciutils                        lspci (PCIe link width/speed, ACS)
# Not the `rdma-core` binary package: on Debian it is udev rules, systemd units and rdma-ndd
# (it pulls in udev), all for a host, none of any use in a container.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libibverbs1 ibverbs-providers librdmacm1 libibumad3 \
      ibverbs-utils infiniband-diags perftest pciutils \
 && rm -rf /var/lib/apt/lists/*

COPY --from=build /wheels /wheels
# [k8s]: lightkube (direct mode); prometheus-client (the agent's /metrics) is a base dependency.
RUN pip install --no-cache-dir "$(ls /wheels/rdmadoctor-*.whl)[k8s]" \
 && rm -rf /wheels

# The root filesystem is read-only in the pods: no .pyc writes, unbuffered logs to stderr.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

# The DaemonSet's uid/gid (deploy/base/daemonset.yaml: runAsUser/runAsGroup 9470). Numeric, so
# the kubelet can verify runAsNonRoot without an /etc/passwd entry.
USER 9470:9470

ENTRYPOINT ["rdmadoctor"]
CMD ["--help"]
