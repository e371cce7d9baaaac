"""The commit manifest, defined in the checkpoint contract (sm_dist.contract.checkpoint)."""

from sm_dist.contract.checkpoint import (
    FORMAT,
    MANIFEST_NAME,
    FileEntry,
    Manifest,
    committed_manifest,
    parse_step,
    sha256_file,
    step_dirname,
)

__all__ = ["FORMAT", "MANIFEST_NAME", "FileEntry", "Manifest", "committed_manifest", "parse_step", "sha256_file",
           "step_dirname"]
