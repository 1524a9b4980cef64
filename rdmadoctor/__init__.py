"""rdmadoctor: is this GPU node (and the pod on it) ready to train over RDMA?"""

__version__ = "0.1.0"
