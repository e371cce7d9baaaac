"""Data channels: the job's training data, as SageMaker delivers it (InputDataConfig), planned once.

`inputs={"train": SOURCE | Channel(...)}` (CLI: `--input NAME=SOURCE[,mode=FastFile][,distribution=ShardedByS3Key]`),
where SOURCE is an S3 prefix (`s3://bucket/prefix`), a local folder (`./data`, `file:///abs/data`: uploaded
to the job's bucket before CreateTrainingJob, once per content), or a file system (`fsx-lustre://fs-id/mount/path`,
`efs://fs-id/path`, in a VPC). Each becomes one InputDataConfig entry; in the container it is
`/opt/ml/input/data/<name>` and `SM_CHANNEL_<NAME>` (docs/PLATFORM.md §1.9). A local folder's upload, the
channels' warnings and their weight for the estimate are `sm_dist.planning.channel_data`'s.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeAlias, TypedDict, TypeVar

from sm_dist.contract.sagemaker import check_channel_name
from sm_dist.errors import ConfigError
from sm_dist.planning.preflight import check_channel_count
from sm_dist.vocab import StrEnum, did_you_mean

#: A channel's mode and distribution as a user's type checker sees them (InputMode's, Distribution's values).
InputModeName: TypeAlias = Literal["File", "FastFile"]
DistributionName: TypeAlias = Literal["FullyReplicated", "ShardedByS3Key"]


class ChannelSettings(TypedDict, total=False):
    """A data channel as a mapping (a config file's `inputs:` entry): its source, mode and distribution."""

    source: str
    mode: InputModeName
    distribution: DistributionName


class InputMode(StrEnum):
    """How a channel reaches the container (Channel.InputMode)."""

    FILE = "File"  #: downloaded to the instance's volume before the script starts
    FAST_FILE = "FastFile"  #: S3 objects appear as files, streamed on first read


class Distribution(StrEnum):
    """How an S3 channel is spread over the instances (S3DataSource.S3DataDistributionType)."""

    FULLY_REPLICATED = "FullyReplicated"  #: every instance gets every object
    SHARDED_BY_S3_KEY = "ShardedByS3Key"  #: each instance gets its share of the objects


class SourceKind(StrEnum):
    S3 = "s3"
    LOCAL = "local"  #: a folder on this machine: uploaded to S3 for the cloud job
    FSX_LUSTRE = "fsx-lustre"
    EFS = "efs"


_FILE_SYSTEMS = {"fsx-lustre://": SourceKind.FSX_LUSTRE, "efs://": SourceKind.EFS}
_S3 = re.compile(r"s3://[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9](/.*)?")
_FILE_SYSTEM = re.compile(r"(?P<id>fs-[0-9a-f]{8,40})(?P<path>/.*)?")


@dataclass(frozen=True)
class Channel:
    """One data channel: where the data is, and how SageMaker delivers it. The source may be given first,
    unnamed, as SDK v2's `TrainingInput(s3_data, ...)` takes it: `Channel("s3://b/train", mode="FastFile")`."""

    source: str
    """s3://bucket/prefix, a local folder (or file:///path), fsx-lustre://fs-id/mount/path or efs://fs-id/path."""
    _: KW_ONLY
    mode: InputMode = InputMode.FILE
    distribution: Distribution = Distribution.FULLY_REPLICATED

    if TYPE_CHECKING:  # what the constructor takes (the fields hold the normalized values; tests/test_public_types.py)
        def __init__(self, source: str | os.PathLike[str], *, mode: InputMode | InputModeName = ...,
                     distribution: Distribution | DistributionName = ...) -> None: ...

    def __post_init__(self) -> None:
        object.__setattr__(self, "source", str(self.source))
        object.__setattr__(self, "mode", _enum(InputMode, self.mode, "mode", "File or FastFile"))
        object.__setattr__(self, "distribution",
                           _enum(Distribution, self.distribution, "distribution", "FullyReplicated or ShardedByS3Key"))
        kind = self.kind
        if kind is SourceKind.S3 and not _S3.fullmatch(self.source):
            raise ConfigError("source", self.source, "expected s3://bucket/prefix")
        if kind in (SourceKind.FSX_LUSTRE, SourceKind.EFS):
            if not _FILE_SYSTEM.fullmatch(self.source.split("://", 1)[1]):
                raise ConfigError("source", self.source, f"expected {kind}://fs-<id>/path")
            if self.mode is not InputMode.FILE or self.distribution is not Distribution.FULLY_REPLICATED:
                raise ConfigError("mode", self.mode.value, f"a {kind} file system is mounted as it is: mode=File, "
                                  "distribution=FullyReplicated")
        if kind is SourceKind.LOCAL:
            if not self.local_path.is_dir():
                raise ConfigError("source", self.source, "no such folder (a local source is a folder; for S3 write "
                                  "s3://...)")
            object.__setattr__(self, "source", str(self.local_path))  # relative to where the plan was made

    @property
    def kind(self) -> SourceKind:
        """Where the data is: an S3 prefix, a local folder, FSx for Lustre or EFS."""
        if self.source.startswith("s3://"):
            return SourceKind.S3
        for prefix, kind in _FILE_SYSTEMS.items():
            if self.source.startswith(prefix):
                return kind
        if "://" in self.source and not self.source.startswith("file://"):
            raise ConfigError("source", self.source, "expected s3://..., a local folder, file:///..., "
                              "fsx-lustre://fs-id/path or efs://fs-id/path")
        return SourceKind.LOCAL

    @property
    def s3_uri(self) -> str:
        """What an S3 source's request names (S3DataSource.S3Uri): the source as a folder (`s3_prefix`)."""
        return s3_prefix(self.source)

    @property
    def local_path(self) -> Path:
        """The folder of a local source (absolute)."""
        return Path(self.source.removeprefix("file://")).expanduser().resolve()

    @property
    def file_system(self) -> tuple[str, str]:
        """(FileSystemId, DirectoryPath) of an FSx for Lustre or EFS source."""
        match = _FILE_SYSTEM.fullmatch(self.source.split("://", 1)[1])
        if match is None:
            raise ConfigError("source", self.source, "not a file-system source")
        return match.group("id"), match.group("path") or "/"

    def to_dict(self) -> dict[str, str]:
        """Source, mode and distribution, for JSON."""
        return {"source": self.source, "mode": self.mode.value, "distribution": self.distribution.value}

    @classmethod
    def parse(cls, text: str) -> Channel:
        """`SOURCE[,mode=FastFile][,distribution=ShardedByS3Key]` (the CLI's --input value after NAME=)."""
        source, *options = str(text).split(",")
        settings: dict[str, str] = {}
        for option in options:
            key, sep, value = option.partition("=")
            if not sep or key.strip() not in ("mode", "distribution"):
                raise ConfigError("input", option, "options are mode=File|FastFile and "
                                  "distribution=FullyReplicated|ShardedByS3Key, e.g. s3://b/train,mode=FastFile")
            settings[key.strip()] = value.strip()
        return cls(source=source.strip(), mode=_enum(InputMode, settings.get("mode", "File"), "mode", "File or FastFile"),
                   distribution=_enum(Distribution, settings.get("distribution", "FullyReplicated"), "distribution",
                                      "FullyReplicated or ShardedByS3Key"))


def s3_prefix(uri: str) -> str:
    """The S3Uri a channel's request carries: `uri` as a folder, ending with '/'.

    S3Prefix delivers every key that starts with S3Uri's key (docs/PLATFORM.md §1.9), so
    s3://b/train would also deliver train_v2/... and train.bak. Ending it with '/' keeps the channel
    to what local mode reads too (`channel_keys`)."""
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    key = key.strip("/")
    return f"s3://{bucket}/{key}/" if key else f"s3://{bucket}/"


def channel_keys(uri: str, keys: Iterable[str]) -> list[str]:
    """The keys of `uri`'s bucket that its channel holds, sorted: every key under `s3_prefix(uri)`,
    folder markers (keys ending in '/') aside. The cloud job's request and local mode's download both
    go through `s3_prefix`, so both read these keys."""
    key_prefix = s3_prefix(uri).removeprefix("s3://").partition("/")[2]
    return sorted(k for k in keys if k.startswith(key_prefix) and not k.endswith("/"))


def prefix_warning(name: str, channel: Channel) -> str | None:
    """A source that is not a folder (s3://b/train): SageMaker's S3Prefix would also deliver train_v2/...;
    the plan reads it as s3://b/train/ in the cloud and locally, and says so."""
    key = channel.source.removeprefix("s3://").partition("/")[2] if channel.kind is SourceKind.S3 else ""
    if not key or key.endswith("/"):  # a folder already, or the whole bucket
        return None
    stem = key.rsplit("/", 1)[-1]
    return (f"channel {name}: {channel.source} is read as the folder {channel.s3_uri} (SageMaker's S3Prefix would also "
            f"deliver keys such as {stem}_v2/... and {stem}.bak); end the source with '/' to say so, or put a single "
            "object in a folder of its own")


_Kind = TypeVar("_Kind", InputMode, Distribution)


def _enum(kind: type[_Kind], value: object, field: str, expected: str) -> _Kind:
    """`value` as a member of `kind`, matched without regard to case (SageMaker spells them FastFile)."""
    if isinstance(value, kind):
        return value
    text = str(value).strip()
    if text.lower() == "pipe" and kind is InputMode:
        raise ConfigError(field, value, "Pipe mode is not supported by sm_dist; use FastFile (streamed on first "
                          "read, no download before the script starts)")
    for member in kind:
        if member.value.lower() == text.lower():
            return member
    raise ConfigError(field, value, f"expected {expected}{did_you_mean(text, [m.value for m in kind])}")


#: What `inputs=` takes per channel: the record, or its source alone (defaults for the rest).
ChannelLike: TypeAlias = "Channel | str | os.PathLike[str]"


def channels_from(inputs: Mapping[str, object]) -> dict[str, Channel]:
    """`inputs` as records, each name checked (SageMaker's rule, not the code channel), and how many (preflight)."""
    check_channel_count(list(inputs))
    out = {}
    for name, value in inputs.items():
        check_channel_name(str(name))
        try:
            out[str(name)] = _channel(value)
        except ConfigError as exc:  # name the channel: inputs.train.mode='Pipe': ...
            field = f"inputs.{name}" + ("" if exc.field in ("inputs", "source") else f".{exc.field}")
            raise ConfigError(field, exc.value, exc.fix) from None
    return out


def _channel(value: object) -> Channel:
    if isinstance(value, Channel):
        return value
    if isinstance(value, Mapping):  # a config file's {source:, mode:, distribution:}
        try:
            return Channel(**{str(k): v for k, v in value.items()})
        except TypeError:
            raise ConfigError("inputs", dict(value), "expected source, mode and distribution") from None
    if isinstance(value, (str, os.PathLike)):
        return Channel.parse(os.fspath(value))
    raise ConfigError("inputs", value, "expected s3://..., a local folder or sm_dist.Channel(...)")


__all__ = ["Channel", "ChannelLike", "ChannelSettings", "channel_keys", "s3_prefix", "prefix_warning", "Distribution", "InputMode", "SourceKind",
           "channels_from"]
