"""The gang: before NCCL starts, the members of one job meet at rank 0, compare the node facts NCCL
needs alike, optionally measure the links between them, and all print the same verdict.

- :mod:`~rdmadoctor.gang.facts`: the one function that reads the compared facts out of a report
- :mod:`~rdmadoctor.gang.membership`: rank, size and job token from the launcher's env or flags
- :mod:`~rdmadoctor.gang.protocol`: the bounded, versioned exchange over TCP
- :mod:`~rdmadoctor.gang.compare`: the majority comparison and the gang's verdict (pure)
- :mod:`~rdmadoctor.gang.bandwidth`: ``--bandwidth``, ring then shifted ring, against the median
- :mod:`~rdmadoctor.gang.session`: rank 0's and a member's part, end to end

Used by ``rdmadoctor.preflight`` (``preflight --gang``, ``run --gang``). Nothing here prints: the
caller passes a ``log`` and renders the result.
"""
