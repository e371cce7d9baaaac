"""Fixtures shared by the whole suite. Each yields one thing.

Area-specific fixtures live in the conftest.py of that area's folder (tests/runtime/, ...). The
multi-process helpers (ports, child environments, launching ranks) are in tests/_harness.py.

Two speeds: plain `pytest` runs the fast set (`-m "not slow"`, pyproject.toml); the README's command
runs everything. A test that starts a process (subprocess, the CLI in a child, multiprocessing,
torchrun, a Jupyter kernel, local mode's hosts) carries `@pytest.mark.slow`; the process guard
registered below (tests/_process_guard.py) fails an unmarked one that tries.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

_TESTS = str(Path(__file__).resolve().parent)
if _TESTS not in sys.path:  # the shared harness (tests/_harness.py) is imported by module name
    sys.path.insert(0, _TESTS)

import _process_guard  # noqa: E402 (found through the path above)
from _harness import LAUNCHER_VARS, free_port  # noqa: E402
from _project import CKPT_BUCKET, TRAIN_PY, create_test_role  # noqa: E402

#: Prefixes of variables from the developer's machine that would change what sm_dist reads or talks to:
#: AWS settings and profiles, sm_dist's own settings, and every launcher's variables (LAUNCHER_VARS).
_STRIP_PREFIXES = ("AWS_", "SM_", "SAGEMAKER_", "XDG_")


def pytest_configure(config: pytest.Config) -> None:
    """The process guard watches every test of the run (its own pytest_configure installs it)."""
    if config.pluginmanager.register(_process_guard, "process_guard") is None:
        raise pytest.UsageError("the process guard (tests/_process_guard.py) cannot be switched off: "
                                "mark a test that starts a process @pytest.mark.slow")


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say how to run what plain `pytest` left out, e.g. for `pytest tests/local/test_rehearsal.py`."""
    left_out = sum(1 for item in terminalreporter.stats.get("deselected", []) if item.get_closest_marker("slow"))
    if left_out and terminalreporter.config.option.markexpr == "not slow":
        terminalreporter.write_line(f'left out: {left_out} slow-marked (they start processes); '
                                    f'-m "" runs them too, -m slow only them')


def pytest_sessionstart(session: pytest.Session) -> None:
    """One botocore loader for the session, and matplotlib's font list built once."""
    _share_botocore_loader(session)
    _build_font_list_once(session)


def _share_botocore_loader(session: pytest.Session) -> None:
    """Every botocore session of the test process reads the service models through one loader.

    Each test makes fresh boto3 sessions (moto resets per test), and each new session's loader parses
    the service JSON again: SageMaker's model alone is megabytes. Profiling tests/planning/test_constraints.py
    put 27% of its time in json.loads of those files (2026-11-29). The files never change within a run and
    botocore never mutates what its loader returns (one session already shares it among its clients), so
    one loader per search path is what a long-lived process with one session gets. The product is unchanged.
    A test that alters a client's model copies what it alters first (tests/cloud/test_supervisor.py _older_botocore)."""
    if importlib.util.find_spec("botocore") is None:
        return
    import botocore.loaders
    import botocore.session

    original = botocore.session.create_loader
    shared: dict[object, botocore.loaders.Loader] = {}

    def create_loader(search_path_string: str | None = None) -> botocore.loaders.Loader:
        if search_path_string not in shared:
            shared[search_path_string] = original(search_path_string)
        return shared[search_path_string]

    botocore.session.create_loader = create_loader  # the name botocore.session imported and calls
    session.config.add_cleanup(lambda: setattr(botocore.session, "create_loader", original))


def _build_font_list_once(session: pytest.Session) -> None:
    """matplotlib's font list, built once per session before any test, in a session folder.

    Building it runs `fc-list` (a process: the guard would fail the first unmarked plotting test),
    and each test's fresh HOME would otherwise rebuild it for every plot."""
    if importlib.util.find_spec("matplotlib") is None:
        return
    folder = tempfile.mkdtemp(prefix="sm-dist-tests-matplotlib-")
    session.config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
    os.environ["MPLCONFIGDIR"] = folder  # not stripped by _isolate; one pytest process, one folder
    importlib.import_module("matplotlib.font_manager")


def _isolate(patch: pytest.MonkeyPatch, home: Path) -> None:
    """Strip the machine's variables and point every home sm_dist, AWS or XDG reads at `home`."""
    for key in list(os.environ):
        if key.startswith(_STRIP_PREFIXES) or LAUNCHER_VARS.match(key):
            patch.delenv(key, raising=False)
    aws = home / ".aws"
    aws.mkdir(parents=True, exist_ok=True)
    for name in ("config", "credentials"):
        (aws / name).touch()
    patch.setenv("HOME", str(home))
    patch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    patch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    patch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    patch.setenv("SM_DIST_CONFIG_HOME", str(home / ".config" / "sm_dist"))
    patch.setenv("SM_DIST_CACHE_HOME", str(home / ".cache" / "sm_dist"))
    patch.setenv("AWS_CONFIG_FILE", str(aws / "config"))
    patch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(aws / "credentials"))
    patch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no credential lookup on 169.254.169.254


@pytest.fixture(scope="session", autouse=True)
def isolated_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Isolation for session- and module-scoped fixtures (set up before any function fixture); yields HOME."""
    home = tmp_path_factory.mktemp("session_home")
    with pytest.MonkeyPatch.context() as patch:
        _isolate(patch, home)
        yield home


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh empty HOME (and config, cache and AWS files in it) per test, with the machine's
    AWS_*, SM_*, SLURM_*, torchrun-style variables stripped, so tests never see this machine; yields HOME.

    Tests that talk to moto set fake credentials themselves (the `aws_credentials` fixture).
    """
    home = tmp_path_factory.mktemp("home")
    _isolate(monkeypatch, home)
    yield home


@pytest.fixture
def aws_credentials(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Fake credentials and region for moto, and IAM's policy simulator in moto (tests/_iam_simulator.py:
    fit's role check runs against the role's real policies, never switched off); yields the region."""
    import _iam_simulator

    _iam_simulator.install(monkeypatch)
    region = "us-east-1"
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", region)
    monkeypatch.setenv("AWS_REGION", region)
    yield region


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """moto's HTTP server on 127.0.0.1 (a real S3 endpoint over HTTP); yields its URL."""
    server_mod = pytest.importorskip("moto.server")
    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture
def port_factory() -> Iterator[object]:
    """Yields `free_port`, a function returning a free 127.0.0.1 TCP port per call."""
    yield free_port


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
    """moto in-process with an execution role (TEST_ROLE_POLICY) and a checkpoint bucket; yields the region."""
    boto3 = pytest.importorskip("boto3")
    moto = pytest.importorskip("moto")
    with moto.mock_aws():
        create_test_role(boto3.Session())
        boto3.client("s3").create_bucket(Bucket=CKPT_BUCKET)
        yield aws_credentials
