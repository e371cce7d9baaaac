"""requirements.txt: pip-installed by PID 1 at job start (as SageMaker's toolkit does), listed
by the plan, refused under network isolation without vendored wheels, checked locally before a run."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from _project import ROLE_ARN
from _wheels import make_wheel

import sm_dist
from sm_dist.container import requirements
from sm_dist.errors import ConfigError, ContainerStartError
from sm_dist.planning import requirements_check
from sm_dist.planning.plan import render_plan

CLOUD = dict(instance_type="ml.g5.xlarge", instance_count=2, strategy="ddp", role=ROLE_ARN, region="us-east-1",
             output_s3_uri="s3://team-bucket/out", max_runtime_s=3600)


@pytest.mark.slow
def test_pid1_installs_from_vendored_wheels_without_an_index(tmp_path: Path) -> None:
    code = tmp_path / "code"
    code.mkdir()
    make_wheel(code)
    (code / "requirements.txt").write_text("smdist_probe_pkg==1.0\n")
    target = tmp_path / "site"
    cmd = requirements.pip_command(code)
    assert cmd is not None and cmd[-3:] == ["--no-index", "--find-links", "wheels"]
    # install into a throwaway target so the test environment is untouched
    env = {"PIP_TARGET": str(target), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    requirements.install(code, env)
    assert (target / "smdist_probe_pkg" / "__init__.py").read_text() == "VALUE = 7\n"


@pytest.mark.slow
def test_a_failed_install_names_pips_error_and_the_fix(tmp_path: Path) -> None:
    code = tmp_path / "code"
    (code / "wheels").mkdir(parents=True)  # no index, no wheel: pip cannot find it
    (code / "requirements.txt").write_text("smdist-no-such-package==9.9\n")
    with pytest.raises(ContainerStartError, match=r"requirements.txt: ERROR: .*smdist-no-such-package.*pip download"):
        requirements.install(code, {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    requirements.install(code, {"SM_DIST_INSTALL_REQUIREMENTS": "0"})  # local mode: never installs
    assert requirements.pip_command(tmp_path) is None  # no requirements.txt: nothing to run


def test_the_plan_lists_it_and_refuses_network_isolation_without_wheels(source_dir: Path) -> None:
    (source_dir / "requirements.txt").write_text("transformers>=5\n")
    plan = sm_dist.plan("train.py", source_dir=str(source_dir), **CLOUD)
    assert any(f.path == "requirements.txt" for f in plan.bundle.files)
    assert "requirements requirements.txt: pip-installed on every host at job start, from the package index" in \
        render_plan(plan)
    with pytest.raises(ConfigError, match="network_isolation=True: .*pip download -r requirements.txt -d wheels"):
        sm_dist.plan("train.py", source_dir=str(source_dir), network_isolation=True, max_restarts=0, **CLOUD)
    (source_dir / "wheels").mkdir()
    (source_dir / "wheels" / "transformers-5.0.0-py3-none-any.whl").write_bytes(b"PK")
    isolated = sm_dist.plan("train.py", source_dir=str(source_dir), network_isolation=True, max_restarts=0, **CLOUD)
    assert isolated.bundle.wheels == 1 and "from the bundle's 1 wheels (no index)" in render_plan(isolated)


def test_a_wheel_the_images_pip_refuses_is_refused_by_the_plan_with_the_images_download(source_dir: Path) -> None:
    """`pip download` on a Mac fetches the Mac's wheels; the image (torch 2.13: Python 3.12, Linux x86_64) refuses
    them at job start, billed. The plan names the wheel and the download for the image's Python and platform."""
    (source_dir / "requirements.txt").write_text("numpy\n")
    wheels = source_dir / "wheels"
    wheels.mkdir()
    mac = wheels / "numpy-2.1.0-cp311-cp311-macosx_14_0_arm64.whl"
    mac.write_bytes(b"PK")
    fix = (r"pip download -r requirements.txt -d wheels --only-binary=:all: --python-version 3\.12 --implementation cp "
           r"--platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64")
    with pytest.raises(ConfigError, match=r"wheels='wheels/numpy-2\.1\.0-cp311-cp311-macosx_14_0_arm64\.whl': cannot "
                       r"install in the job's image \(Python 3\.12, Linux x86_64\); download the image's wheels "
                       "instead: " + fix):
        sm_dist.plan("train.py", source_dir=str(source_dir), **CLOUD)
    mac.unlink()
    too_new = wheels / "numpy-2.1.0-cp312-cp312-manylinux_2_39_x86_64.whl"  # needs a newer glibc than the image's
    too_new.write_bytes(b"PK")
    with pytest.raises(ConfigError, match="manylinux_2_39_x86_64.whl': cannot install"):
        sm_dist.plan("train.py", source_dir=str(source_dir), **CLOUD)
    too_new.unlink()
    for name in ("numpy-2.1.0-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
                 "tqdm-4.67.0-py3-none-any.whl", "cffi_ext-1.0-cp312-abi3-manylinux_2_28_x86_64.whl"):
        (wheels / name).write_bytes(b"PK")
    assert sm_dist.plan("train.py", source_dir=str(source_dir), **CLOUD).bundle.wheels == 3
    shutil.rmtree(wheels)  # no wheels under network isolation: the fix names the image's Python and platform
    with pytest.raises(ConfigError, match="network_isolation=True: .*" + fix):
        sm_dist.plan("train.py", source_dir=str(source_dir), network_isolation=True, max_restarts=0, **CLOUD)


def test_the_local_check_names_what_this_environment_lacks(tmp_path: Path) -> None:
    req = tmp_path / "requirements.txt"
    req.write_text("# deps\ntorch>=2.0\nsmdist-not-installed-anywhere>=1\ntorch<1.0  # too old here\n"
                   "pywin32; sys_platform == 'win32'\n-r other.txt\n")
    missing, unchecked = requirements_check.unmet(req)
    assert missing[0] == "smdist-not-installed-anywhere>=1 (not installed)"
    assert missing[1].startswith("torch<1.0 (2.") and len(missing) == 2  # the win32-only line does not apply
    assert unchecked == ["-r other.txt"]
