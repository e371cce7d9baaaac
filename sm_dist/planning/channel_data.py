"""A channel's data as the plan sees it: a local folder scanned and fingerprinted (`scan_folder`), the
uploads a cloud job makes before CreateTrainingJob (`plan_uploads`), the channels' warnings and their
bytes for the estimate's start-up (`data_load`). The channel records themselves are
`sm_dist.planning.channels`'s."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from sm_dist.errors import ConfigError
from sm_dist.estimator.cost import DataLoad
from sm_dist.planning.channels import Channel, Distribution, InputMode, SourceKind, prefix_warning


@dataclass(frozen=True, kw_only=True)
class LocalData:
    """A local folder's files, fingerprinted: the upload a cloud plan would make, and the rehearsal's copy."""

    folder: Path
    files: tuple[tuple[str, int], ...]
    """(path relative to the folder, size) of every file, sorted."""
    fingerprint: str
    """sha256 of every file's path, size and modification time: the same data gets the same S3 prefix."""

    @property
    def total_bytes(self) -> int:
        return sum(size for _, size in self.files)


@dataclass(frozen=True, kw_only=True)
class DataUpload:
    """A local channel the cloud backend uploads before CreateTrainingJob: to a prefix named by its
    content, so the same data is uploaded once however many jobs read it."""

    channel: str
    data: LocalData
    s3_uri: str
    """The prefix the channel reads (ends with /)."""

    @property
    def complete_marker(self) -> str:
        """The object written after the last file: its presence means the prefix holds all the data."""
        return self.s3_uri.rstrip("/") + ".sm-dist-complete"

    def to_dict(self) -> dict[str, object]:
        return {"channel": self.channel, "folder": str(self.data.folder), "files": len(self.data.files),
                "bytes": self.data.total_bytes, "s3_uri": self.s3_uri}


def plan_uploads(channels: Mapping[str, Channel], data_prefix: str) -> tuple[dict[str, Channel], tuple[DataUpload, ...]]:
    """The channels as the request names them (a local folder becomes its upload prefix under
    `data_prefix`) and the uploads that makes. Reads the folders' listings; uploads nothing."""
    out: dict[str, Channel] = {}
    uploads = []
    for name, channel in channels.items():
        if channel.kind is not SourceKind.LOCAL:
            out[name] = channel
            continue
        data = scan_folder(channel.local_path)
        uri = f"{data_prefix.rstrip('/')}/{name}-{data.fingerprint[:16]}/"
        uploads.append(DataUpload(channel=name, data=data, s3_uri=uri))
        out[name] = Channel(source=uri, mode=channel.mode, distribution=channel.distribution)
    return out, tuple(uploads)


def channel_warnings(channels: Mapping[str, Channel], uploads: tuple[DataUpload, ...], instance_count: int,
                     volume_gb: int, local_nvme: bool) -> list[str]:
    """What the channels say about the plan: an S3 source read as a folder (`s3_prefix`); for a local
    channel, fewer objects than instances under ShardedByS3Key ("some nodes won't get any data"), more
    File-mode data per instance than its volume holds (docs/PLATFORM.md §1.9)."""
    warnings = [w for name, channel in channels.items() if (w := prefix_warning(name, channel))]
    per_instance = 0.0
    for upload in uploads:
        channel = channels[upload.channel]
        sharded = channel.distribution is Distribution.SHARDED_BY_S3_KEY
        if sharded and len(upload.data.files) < instance_count:
            warnings.append(f"channel {upload.channel}: {len(upload.data.files)} files for {instance_count} instances "
                            "under ShardedByS3Key: some instances get no data (and are billed); split it into more files")
        elif sharded and len(upload.data.files) % instance_count:
            warnings.append(f"channel {upload.channel}: {len(upload.data.files)} files under ShardedByS3Key on "
                            f"{instance_count} instances: the hosts get different numbers of files, which "
                            f"runtime.channel_files refuses at start-up (a loader per host would hang at the epoch's "
                            f"end); give it a multiple of {instance_count} files")
        if channel.mode is InputMode.FILE:
            per_instance += upload.data.total_bytes / (instance_count if sharded else 1)
    if not local_nvme and per_instance > volume_gb * 2**30:
        warnings.append(f"the File-mode data each instance downloads ({per_instance / 2**30:,.1f} GiB) exceeds its "
                        f"volume (volume_size_gb={volume_gb}): raise volume_size_gb, or use mode=FastFile")
    return warnings


def data_load(channels: Mapping[str, Channel]) -> DataLoad:
    """The channels' bytes by how they reach the instances, for the estimate's start-up: a local folder's
    size is known (it is read here); an S3 prefix's is not (the plan lists nothing in S3) and a file
    system is mounted, not downloaded."""
    replicated = sharded = streamed = 0.0
    unknown = []
    for name, channel in channels.items():
        if channel.kind in (SourceKind.FSX_LUSTRE, SourceKind.EFS):
            continue
        if channel.kind is not SourceKind.LOCAL:
            unknown.append(name)
            continue
        size = float(scan_folder(channel.local_path).total_bytes)
        if channel.mode is InputMode.FAST_FILE:
            streamed += size
        elif channel.distribution is Distribution.SHARDED_BY_S3_KEY:
            sharded += size
        else:
            replicated += size
    return DataLoad(replicated_bytes=replicated, sharded_bytes=sharded, streamed_bytes=streamed, unknown=tuple(unknown))


def scan_folder(folder: Path) -> LocalData:
    """Every file under `folder` (symlinks followed, hidden files included: SageMaker copies whatever the prefix holds)."""
    digest = hashlib.sha256()
    files = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        stat = path.stat()
        rel = path.relative_to(folder).as_posix()
        files.append((rel, stat.st_size))
        digest.update(f"{rel}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    if not files:
        raise ConfigError("source", str(folder), "the folder holds no files: SageMaker would start the job on an "
                          "empty channel")
    return LocalData(folder=folder, files=tuple(files), fingerprint=digest.hexdigest())
