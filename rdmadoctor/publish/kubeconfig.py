"""The credentials of ``--publish node`` (and ``fleet --kube``): a kubeconfig file read with its
size bounded and its shape checked before lightkube reads it, so a wrong file (empty, a list, a
log given by mistake, /dev/zero) is a sentence saying what is wrong, never a traceback.
:class:`rdmadoctor.publish.nodeapi.NodeAPI` loads it (or the in-cluster ServiceAccount).
"""

from __future__ import annotations

import os


def _short(value: object, limit: int = 200) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# A kubeconfig is a few kilobytes (tens with embedded certificates and many clusters); more is
# not one (/dev/zero, a log given by mistake), and reading it whole could exhaust memory.
KUBECONFIG_MAX_BYTES = 16 << 20
CREDENTIALS_HINT = (
    "In a pod, mount a ServiceAccount token (the deploy/ direct-mode overlays mount a projected token that "
    "expires after an hour, in the agent container only); elsewhere pass --kubeconfig"
)
_KUBECONFIG_SHAPE = "a YAML mapping with clusters:, contexts: and users: lists, as `kubectl config view --raw` prints"


class _NotKubeconfig(Exception):
    """What is wrong with a kubeconfig file, said before lightkube reads it."""


def _read_kubeconfig(path: str) -> str:
    """The text of a regular file of at most KUBECONFIG_MAX_BYTES; _NotKubeconfig otherwise
    (rdmadoctor.core.files.read_regular: a FIFO with no writer is refused, not waited on)."""
    from rdmadoctor.core.files import NotRegular, read_regular

    try:
        raw = read_regular(path, KUBECONFIG_MAX_BYTES)
    except FileNotFoundError:
        raise _NotKubeconfig("no such file") from None
    except IsADirectoryError:
        raise _NotKubeconfig("it is a directory, not a kubeconfig file") from None
    except NotRegular as e:
        raise _NotKubeconfig(f"it is {e.kind}, not a kubeconfig file") from None
    except OSError as e:
        raise _NotKubeconfig(f"cannot read it: {e.strerror or e}") from None
    if len(raw) > KUBECONFIG_MAX_BYTES:
        raise _NotKubeconfig(f"not a kubeconfig (larger than {KUBECONFIG_MAX_BYTES >> 20} MiB)")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _NotKubeconfig(f"not a kubeconfig (not UTF-8 text: byte {e.start})") from None


def _yaml_type(value: object) -> str:
    if value is None:
        return "null"
    return {dict: "mapping", list: "list", str: "string", bool: "boolean", int: "number",
            float: "number"}.get(type(value), type(value).__name__)


def check_kubeconfig_shape(data: object) -> None:
    """Raise _NotKubeconfig saying what is wrong unless ``data`` (the parsed YAML) has the shape
    lightkube's KubeConfig.from_dict reads: it indexes and iterates without checking, so an
    empty file or a list is an AttributeError or a TypeError there."""
    if data is None:
        raise _NotKubeconfig(f"not a kubeconfig (the file is empty; expected {_KUBECONFIG_SHAPE})")
    if not isinstance(data, dict):
        raise _NotKubeconfig(f"not a kubeconfig (a YAML {_yaml_type(data)} at the top level; expected {_KUBECONFIG_SHAPE})")
    current = data.get("current-context")
    if current is not None and not isinstance(current, str):
        raise _NotKubeconfig(f"not a kubeconfig (current-context is a {_yaml_type(current)}, not a context's name)")
    for key, item, required in (("clusters", "cluster", True), ("contexts", "context", True), ("users", "user", False)):
        if key not in data or data[key] is None:
            if required:
                raise _NotKubeconfig(f"not a kubeconfig (no {key}: list; expected {_KUBECONFIG_SHAPE})")
            continue
        entries = data[key]
        if not isinstance(entries, list):
            raise _NotKubeconfig(
                f"not a kubeconfig ({key}: is a {_yaml_type(entries)}, expected a list of "
                f"{{name: NAME, {item}: {{...}}}} entries)"
            )
        for i, entry in enumerate(entries):
            if not isinstance(entry, dict):
                raise _NotKubeconfig(f"not a kubeconfig ({key}[{i}] is a {_yaml_type(entry)}, expected {{name: NAME, {item}: {{...}}}})")
            if not isinstance(entry.get("name"), str):
                raise _NotKubeconfig(f"not a kubeconfig ({key}[{i}] has no name: string)")
            if not isinstance(entry.get(item), dict):
                raise _NotKubeconfig(
                    f"not a kubeconfig ({key}[{i}] ({entry['name']!r}) has no {item}: mapping"
                    f"{'' if item not in entry else f', its {item}: is a {_yaml_type(entry[item])}'})"
                )


def load_kubeconfig(path: str):
    """lightkube's KubeConfig of the file at ``path``, its content checked first; _NotKubeconfig
    (what is wrong) for anything that is not one."""
    from pathlib import Path

    import yaml
    from lightkube import KubeConfig

    full = os.path.expanduser(path)
    text = _read_kubeconfig(full)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        what = getattr(e, "problem", None) or type(e).__name__
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise _NotKubeconfig(f"not a kubeconfig (not valid YAML: {what}{at})") from None
    except RecursionError:
        raise _NotKubeconfig("not a kubeconfig (YAML nested thousands of levels deep)") from None
    check_kubeconfig_shape(data)
    try:
        return KubeConfig.from_dict(data, fname=Path(full))
    except Exception as e:  # noqa: BLE001 - a field of the wrong type (msgspec's or the dataclass's error)
        raise _NotKubeconfig(f"not a kubeconfig ({type(e).__name__}: {_short(e)})") from None
