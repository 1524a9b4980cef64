"""``--publish nfd``: the Node Feature Discovery local feature file, ``<features.d>/rdmadoctor``.

How nfd-worker's local source reads features.d (kubernetes-sigs/node-feature-discovery,
source/local/local.go), and what that decides here:

- every regular file whose name does not start with '.' is read on start, on each sleep
  interval and on an fsnotify event; a dot-file is ignored. So the new content goes to a
  dot-file in the same directory, is fsync'd, and is renamed over ``rdmadoctor``: a reader
  sees the old file or the new one, never half of one, even if we are killed mid-write.
- a file larger than 65536 bytes is skipped whole ("file size limit exceeded"), so we stay under.
- ``# +expiry-time=<RFC3339>`` applies to the lines after it: once past, those features are
  dropped, so the labels vanish a few intervals after rdmadoctor stops. It is the first line.
- ``key=value`` per line; other lines starting with '#' are comments (an unknown ``# +`` directive
  is logged as an error, so expiry-time is the only directive written).
- NFD adds ``feature.node.kubernetes.io/`` to an unprefixed key, unless its DisableAutoPrefix
  feature gate or ``autoDefaultNs: false`` (nfd-master config) turns that off, and then
  nfd-master drops unprefixed keys. We always write the full key, which every version reads
  the same way.
- nfd-master (>= v0.13) accepts any label namespace except kubernetes.io and *.kubernetes.io
  (feature.node.kubernetes.io, profile.node.kubernetes.io and their sub-domains are always
  allowed) and whatever its ``-deny-label-ns``/``denyLabelNs`` lists; nfd-master <= v0.12 allowed
  only feature.node.kubernetes.io unless ``-extra-label-ns`` listed more. So rdmadoctor.io/ works
  on a current NFD; on an old one (or with a deny list), add ``-extra-label-ns=rdmadoctor.io`` or
  pick ``--prefix rdmadoctor.feature.node.kubernetes.io/``, which no NFD version refuses.
"""

from __future__ import annotations

import errno
import os
import sys
import time
from pathlib import Path
from typing import IO, Callable

from rdmadoctor.core import labels as L
from rdmadoctor.core import words
from rdmadoctor.publish.base import (
    DEFAULT_FEATURES_DIR,
    FEATURE_FILE,
    Publisher,
    PublishError,
    node_labels,
    parse_rfc3339,
    rfc3339,
)
from rdmadoctor.publish.fsutil import write_atomic as _write_atomic

# source/local/local.go MaxFeatureFileSize: a larger file is skipped whole.
MAX_FILE_BYTES = 65536
EXPIRY_DIRECTIVE = "# +expiry-time="
# A temp file a killed writer left behind (NFD ignores it) is removed once older than this.
STALE_TEMP_SECONDS = 60


def _priority(key: str) -> tuple:
    # When the 64 KiB budget runs out, the labels selectors depend on go first.
    name = key.rpartition("/")[2]
    core = {k.rpartition("/")[2] for k in L.OWNED}
    return (key != L.RDMA_CAPABLE, name not in core, key)


def fit(wanted: dict[str, str], budget: int = MAX_FILE_BYTES) -> tuple[dict[str, str], list[str]]:
    """The labels that fit in ``budget`` bytes with the expiry header; and the keys left out."""
    used = len(EXPIRY_DIRECTIVE) + len("2000-01-01T00:00:00Z\n")
    kept: dict[str, str] = {}
    dropped: list[str] = []
    for key in sorted(wanted, key=_priority):
        size = len(f"{key}={wanted[key]}\n".encode())
        if used + size < budget:
            kept[key] = wanted[key]
            used += size
        else:
            dropped.append(key)
    return kept, dropped


def render_body(labels: dict[str, str]) -> str:
    return "".join(f"{k}={labels[k]}\n" for k in sorted(labels))


def render(labels: dict[str, str], expires_at: float) -> str:
    """The whole feature file: the expiry directive, then the labels sorted by key."""
    return f"{EXPIRY_DIRECTIVE}{rfc3339(expires_at)}\n" + render_body(labels)


def split_file(text: str) -> tuple[float | None, str]:
    """(expiry, body) of a feature file we wrote; expiry None when the first line is not ours."""
    first, _, rest = text.partition("\n")
    if not first.startswith(EXPIRY_DIRECTIVE):
        return None, text
    return parse_rfc3339(first[len(EXPIRY_DIRECTIVE):]), rest


def needs_write(old: str | None, body: str, now: float, window: float) -> bool:
    """Whether to rewrite: the labels changed, or the expiry is within half its window.

    Rewriting only the expiry every cycle would wake NFD (fsnotify) and churn the disk for
    nothing; waiting until half the window is left still leaves several intervals of slack
    before NFD would drop the labels. An expiry further out than a full window (clock stepped
    back, --expiry lowered) is rewritten too."""
    if old is None:
        return True
    expires, old_body = split_file(old)
    if expires is None or old_body != body:
        return True
    left = expires - now
    return left < window / 2 or left > window + 60


def write_feature_file(directory: str | os.PathLike, name: str, data: bytes) -> Path:
    """Write the feature file ``directory/name`` so a reader sees the old content or the new,
    never a mix (fsutil.write_atomic; its temp file is a dot-file, which NFD ignores)."""
    target = Path(directory) / name
    _write_atomic(target, data)
    return target


def _remove_stale_temps(directory: Path, name: str, now: float) -> None:
    try:
        entries = list(directory.glob(f".{name}.*.tmp"))
    except OSError:
        return
    for p in entries:
        try:
            if now - p.stat().st_mtime > STALE_TEMP_SECONDS:
                p.unlink()
        except OSError:
            pass


def _dir_error(directory: str, e: OSError | None) -> PublishError:
    mount = (
        f"give the agent a writable directory at {directory}: deploy/base's staging emptyDir (its nfd-relay "
        f"container copies rdmadoctor's labels into the host's {DEFAULT_FEATURES_DIR}), or the host's "
        f"{DEFAULT_FEATURES_DIR} itself (a hostPath volume, not readOnly) in a pod of your own"
    )
    if e is None or e.errno in (errno.ENOENT, errno.ENOTDIR):
        what = "does not exist" if e is None or e.errno == errno.ENOENT else "is not a directory"
        return PublishError(
            f"NFD features directory {directory} {what}: nfd-worker would never see the labels; "
            f"{mount}, or pass --features-dir", transient=False,
        )
    if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return PublishError(
            f"cannot write the NFD feature file in {directory}: {e.strerror}; {mount}, and run "
            "the container as a user that may write it (the host directory is root's)", transient=False,
        )
    # ENOSPC, EIO and the like may pass: try again next cycle.
    return PublishError(f"writing the NFD feature file in {directory} failed: {e.strerror or e}", transient=True)


class NfdPublisher(Publisher):
    """Writes ``<features_dir>/rdmadoctor`` when the labels change or the expiry needs refreshing."""

    def __init__(
        self,
        features_dir: str,
        *,
        expiry: float,
        prefix: str = L.PREFIX,
        dry_run: bool = False,
        out: IO[str] | None = None,
        clock: Callable[[], float] = time.time,
        name: str = FEATURE_FILE,
    ):
        self.features_dir = str(features_dir)
        self.expiry = float(expiry)
        self.prefix = prefix
        self.dry_run = dry_run
        self.out = out if out is not None else sys.stdout
        self.clock = clock
        self.name = name
        self.path = os.path.join(self.features_dir, name)
        self.problems: tuple[str, ...] = ()
        self._found = ""  # what _read_old found at the path when it was no regular file

    def content(self, report: dict, now: float | None = None) -> str:
        """The file this report gives at ``now``."""
        now = self.clock() if now is None else now
        wanted, problems = node_labels(report, self.prefix)
        kept, dropped = fit(wanted)
        self.problems = problems + tuple(f"label {k!r} left out: the file would pass NFD's 64 KiB limit" for k in dropped)
        return render(kept, now + self.expiry)

    def _read_old(self) -> str | None:
        """The file written before, or None (absent, unreadable, not a regular file: rewriting it
        is the fix). Read the bounded, non-blocking way (rdmadoctor.core.files.read_regular): a
        FIFO put there would otherwise block the cycle for ever, a device never end."""
        from rdmadoctor.core.files import NotRegular, read_regular

        self._found = ""
        try:
            data = read_regular(self.path, MAX_FILE_BYTES)
        except FileNotFoundError:
            return None
        except NotRegular as e:
            self._found = e.kind
            return None
        except OSError:
            return None
        return data.decode("utf-8", "replace")

    def publish(self, report: dict) -> list[str]:
        now = self.clock()
        text = self.content(report, now)
        _, body = split_file(text)
        count = body.count("\n")
        expires = rfc3339(now + self.expiry)
        if self.dry_run:
            self.out.write(f"# would write {self.path}\n{text}")
            self.out.flush()
            self.summary = f"dry run: would write {words.count(count, 'label')} to {self.path} (expiry {expires})"
            return []
        d = Path(self.features_dir)
        if not d.is_dir():
            try:
                os.stat(d)
                err: OSError | None = OSError(errno.ENOTDIR, "not a directory")
            except OSError as e:
                err = e
            raise _dir_error(self.features_dir, err)
        if not needs_write(self._read_old(), body, now, self.expiry):
            self.summary = f"{self.path} unchanged ({words.count(count, 'label')})"
            return []
        _remove_stale_temps(d, self.name, now)
        try:
            write_feature_file(d, self.name, text.encode())
        except OSError as e:
            raise _dir_error(self.features_dir, e) from e
        self.summary = f"wrote {words.count(count, 'label')} to {self.path} (expiry {expires})"
        if self._found:
            self.summary += f"; it replaced {self._found} that was there, not a file rdmadoctor wrote"
        return ["nfd"]
