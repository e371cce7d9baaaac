"""The "sagemaker-sync" storage: write into CheckpointConfig.LocalPath, SageMaker mirrors it to S3.

What SageMaker does with that folder (docs/PLATFORM.md §1.4): it restores the whole S3 prefix into it on
every host when a job (or a spot restart) begins, uploads new files one at a time in the
background while the job runs, mirrors deletes, and gives no "upload finished" signal except
undocumented ``<file>.sagemaker-uploaded`` markers. So this storage:

* stages outside LocalPath and renames into place; when a copy is needed, the temporary name
  ends in ``.sagemaker-ignore`` (what AWS's own containers use) so half a file is never uploaded;
* names files per rank (all hosts share one S3 prefix);
* lets retention delete an old checkpoint only after a newer committed one is confirmed in S3 —
  by asking S3 when it is reachable, else by the uploader's markers; unconfirmed, it keeps it;
* fills files missing on this host (another host's shards after an in-job restart) from S3
  when the URI is known.

Under network isolation (the plan's SM_DIST_NETWORK_ISOLATION) the container has no S3 and no
credentials (docs/PLATFORM.md §1.7): it never asks S3 — the markers confirm uploads, and a restarted
host's folder already holds the other hosts' files (the worker's restore, from its peers).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from sm_dist.contract.checkpoint import MANIFEST_NAME, Manifest, step_dirname
from sm_dist.contract.container import NETWORK_ISOLATION_ENV, SYNC_IGNORE_SUFFIX, SYNC_UPLOADED_SUFFIX
from sm_dist.errors import CheckpointError
from sm_dist.runtime.checkpoint.storage import LocalStorage, verify_files

if TYPE_CHECKING:
    from sm_dist.runtime.checkpoint.s3 import S3Storage

_log = logging.getLogger(__name__)

#: Suffix SageMaker's uploader skips, and the marker it writes next to a file once it is in S3
#: (the container contract's; docs/PLATFORM.md §1.4).
IGNORE_SUFFIX = SYNC_IGNORE_SUFFIX
UPLOADED_SUFFIX = SYNC_UPLOADED_SUFFIX
#: Attempts when asking S3 whether a checkpoint arrived: a quick answer or "unknown".
_PROBE_ATTEMPTS = 2


class SageMakerSyncStorage(LocalStorage):
    """LocalPath of a SageMaker job with CheckpointConfig (default /opt/ml/checkpoints)."""

    tmp_suffix = IGNORE_SUFFIX

    def __init__(self, local_path: str | os.PathLike[str], *, s3_uri: str | None = None, rank: int = 0) -> None:
        super().__init__(local_path)
        self.s3_uri = s3_uri
        self._rank = rank
        tag = hashlib.sha256(str(self.root).encode()).hexdigest()[:12]
        self._stage = Path(tempfile.gettempdir()) / f"sm_dist-stage-{os.getuid()}" / tag

    def _stage_root(self) -> Path:
        return self._stage  # outside LocalPath: the uploader never sees staged files

    def _s3(self) -> S3Storage | None:
        if not self.s3_uri or os.environ.get(NETWORK_ISOLATION_ENV) == "1":
            return None
        from sm_dist.runtime.checkpoint.s3 import S3Storage

        return S3Storage(self.s3_uri, max_attempts=_PROBE_ATTEMPTS, rank=self._rank,
                         local_root=self._stage / "s3")

    def is_durable(self, step: int) -> bool:
        raw = self.read_manifest(step)
        if raw is None:
            return False
        manifest = Manifest.from_json(raw, where=f"{self.root}/{step_dirname(step)}")
        s3 = self._s3()
        if s3 is not None:
            try:
                return s3.read_manifest(step) == raw and not _missing_in_s3(s3, step, manifest)
            except CheckpointError as exc:
                _log.info("S3 not reachable to confirm %s (%s); checking upload markers", step_dirname(step), exc)
        folder = self._step(step)
        names = [*manifest.files, MANIFEST_NAME]
        return all((folder / (rel + UPLOADED_SUFFIX)).exists() for rel in names)

    def verify(self, step: int, manifest: Manifest) -> list[str]:
        """Sizes only: files here by stat, files only in S3 (another host's) by a listing. Each rank
        checks the sha256 of the files it reads in :meth:`local_copy`, so no file is hashed twice."""
        folder = self._step(step)
        present = {rel for rel in manifest.files if (folder / rel).is_file()}
        problems = [f"{rel}: {(folder / rel).stat().st_size} bytes, manifest says {manifest.files[rel].size}"
                    for rel in sorted(present) if (folder / rel).stat().st_size != manifest.files[rel].size]
        absent = [rel for rel in manifest.files if rel not in present]
        s3 = self._s3() if absent else None
        if s3 is None:
            return problems + [f"{rel}: missing" for rel in absent]
        try:
            sizes = s3.sizes(step)
        except CheckpointError as exc:
            return problems + [f"{len(absent)} file(s) missing here and S3 unreachable ({exc})"]
        return problems + [f"{rel}: missing here and in S3" for rel in absent
                           if sizes.get(rel) != manifest.files[rel].size]

    def local_copy(self, step: int, manifest: Manifest, rels: list[str]) -> Path:
        folder = self._step(step)
        missing = [rel for rel in rels if verify_files(folder, manifest, [rel])]
        self._verified.update((step, rel) for rel in rels if rel not in missing)  # hashed just now
        s3 = self._s3()
        if missing and s3 is not None:
            _log.info("%d file(s) of %s not on this host; fetching them from %s", len(missing),
                      step_dirname(step), self.s3_uri)
            fetched = s3.local_copy(step, manifest, missing)
            for rel in missing:
                tmp = folder / f"{rel}.rank{self._rank}{IGNORE_SUFFIX}"  # ranks of a host may fetch one file
                tmp.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(fetched / rel, tmp)
                os.replace(tmp, folder / rel)
            s3.release(step)
        return super().local_copy(step, manifest, rels)


def _missing_in_s3(s3: S3Storage, step: int, manifest: Manifest) -> list[str]:
    """Files of the manifest that S3 does not hold with the right size."""
    sizes = s3.sizes(step)
    return [rel for rel, entry in manifest.files.items() if sizes.get(rel) != entry.size]


__all__ = ["IGNORE_SUFFIX", "UPLOADED_SUFFIX", "SageMakerSyncStorage"]
