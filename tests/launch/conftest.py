"""Fixtures of the launch tests: a user source dir, moto with a role and a checkpoint bucket."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

ROLE_ARN = "arn:aws:iam::123456789012:role/sm-dist-test"
CKPT_BUCKET = "ckpt-bucket"
DEFAULT_BUCKET = "sagemaker-us-east-1-123456789012"
TRAIN_PY = """import sys
print("[sm_dist] step=1 loss=0.5", sys.argv[1:])
"""


@pytest.fixture
def source_dir(tmp_path: Path) -> Iterator[Path]:
    """A user project: code to upload, and things that must stay out of the bundle."""
    src = tmp_path / "project"
    (src / "pkg").mkdir(parents=True)
    (src / "train.py").write_text(TRAIN_PY)
    (src / "pkg" / "__init__.py").write_text("")
    (src / "pkg" / "mod.py").write_text("def main():\n    print('main')\n")
    (src / "configs").mkdir()
    (src / "configs" / "base.yaml").write_text("lr: 0.1\n")
    for junk in (".git/config", "__pycache__/x.pyc", ".venv/lib/site.py", "myenv/pyvenv.cfg", "myenv/lib/y.py",
                 "weights/model.pt", "data/big.csv", "notes/draft.txt", ".ipynb_checkpoints/a.ipynb"):
        (src / junk).parent.mkdir(parents=True, exist_ok=True)
        (src / junk).write_text("x")
    (src / "data" / "big.csv").write_bytes(b"0" * (11 * 2**20))
    (src / ".smdistignore").write_text("# scratch\nnotes/\n")
    yield src


@pytest.fixture
def aws(aws_credentials: str) -> Iterator[str]:
    """moto in-process with an execution role and a checkpoint bucket; yields the region."""
    boto3 = pytest.importorskip("boto3")
    moto = pytest.importorskip("moto")
    with moto.mock_aws():
        boto3.client("iam").create_role(RoleName="sm-dist-test", AssumeRolePolicyDocument="{}")
        boto3.client("s3").create_bucket(Bucket=CKPT_BUCKET)
        yield aws_credentials
