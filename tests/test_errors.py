"""One error tree: every error sm_dist raises on purpose is an SmDistError, and the CLI turns each
into one line on stderr and the class's exit code."""

from __future__ import annotations

import argparse
import sys

import pytest

import sm_dist
from sm_dist import cli, errors

_ARGS = {
    errors.ConfigError: ("instance_type", "ml.x", "use a real one"),
    errors.CatalogError: ("instance_type", "ml.x", "use a real one"),
    errors.MissingDependencyError: ("local mode's S3 endpoint", "moto[server,s3]", "local"),
}


def _error_classes() -> list[type[errors.SmDistError]]:
    return [getattr(errors, name) for name in errors.__all__]


def test_every_public_error_is_in_the_tree_and_exported() -> None:
    from sm_dist.container import pid1_env
    from sm_dist.provision import aws

    assert all(issubclass(cls, errors.SmDistError) for cls in _error_classes())
    assert aws.InfraError is errors.InfraError and pid1_env.ContainerStartError is errors.ContainerStartError
    assert issubclass(errors.SdkError, errors.LaunchError) and issubclass(errors.ContainerStartError, errors.RuntimeEnvError)
    assert not hasattr(errors, "LaunchFailure") and "LaunchFailure" not in sm_dist.__all__  # the old name is gone
    assert {name for name in errors.__all__} <= set(sm_dist.__all__)


@pytest.mark.parametrize("cls", _error_classes(), ids=lambda c: c.__name__)
def test_cli_maps_each_error_to_one_line_and_its_exit_code(cls: type[errors.SmDistError], monkeypatch,
                                                         capsys) -> None:
    def failing(args: argparse.Namespace) -> int:
        raise cls(*_ARGS.get(cls, ("what went wrong; the fix",)))

    def parser(command: str) -> argparse.ArgumentParser:
        p = argparse.ArgumentParser()
        p.add_argument("-v", "--verbose", action="store_true")
        p.set_defaults(_run=failing)
        return p

    monkeypatch.setattr(cli, "build_parser", parser)
    code = cli.main(["status"])
    err = capsys.readouterr().err
    assert code == cls.exit_code != 0
    assert err.startswith("sm-dist status: error: ") and err.count("\n") == 1 and "Traceback" not in err


def test_missing_moto_names_the_extra(monkeypatch) -> None:
    from sm_dist.local.s3_endpoint import S3Endpoint

    monkeypatch.setitem(sys.modules, "moto.server", None)  # import fails as if not installed
    with pytest.raises(errors.MissingDependencyError, match=r"pip install 'sm_dist\[local\]'"):
        S3Endpoint().start()


def test_check_int_refuses_a_bool_and_a_number_out_of_bounds_with_the_fix() -> None:
    """The one bounded-int check: True is not 1, the bounds hold, None passes only when optional."""
    errors.check_int("n", 3, 1, maximum=3)
    errors.check_int("n", None, 1, optional=True)
    for value in (True, 0, 4, None, 2.0, "2"):
        with pytest.raises(errors.ConfigError) as caught:
            errors.check_int("n", value, 1, "use 1..3", maximum=3)
        assert (caught.value.field, caught.value.value, caught.value.fix) == ("n", value, "use 1..3")
    with pytest.raises(errors.ConfigError, match=r"n=-1: expected an integer >= 0"):
        errors.check_int("n", -1, 0)
