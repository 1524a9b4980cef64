"""Slurm as a home for rdmadoctor: ``rdmadoctor slurm health`` (HealthCheckProgram, cron) and
``rdmadoctor slurm prolog [--gang]`` (Prolog with PrologFlags=Alloc). docs/slurm.md is the guide.

- :mod:`~rdmadoctor.slurm.hostlist`: Slurm's hostlist syntax (``n[1-2,4-5]``), expanded in-process
- :mod:`~rdmadoctor.slurm.scontrol`: the one way to Slurm: ``scontrol`` with a deadline per call,
  ``--dry-run`` printing the commands instead; parsing of ``scontrol show node -o``
- :mod:`~rdmadoctor.slurm.reason`: the drain reasons rdmadoctor writes (``rdmadoctor: CODE ...``)
  and how it recognises its own
- :mod:`~rdmadoctor.slurm.health`: checks -> :func:`rdmadoctor.core.quarantine.decide` -> scontrol
- :mod:`~rdmadoctor.slurm.prolog`: the node's checks or the job's gang -> blame -> its own drain

What to do with a verdict is not decided here: :mod:`rdmadoctor.core.quarantine` decides for every
actuator (the Kubernetes taints too); this package reads Slurm and carries out the one action.
"""
