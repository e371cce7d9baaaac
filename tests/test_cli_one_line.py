"""Input errors on the command line are one line that names the fix, never the whole usage first (in-process:
argparse's exit is a SystemExit)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sm_dist import cli


def _error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as exited:
        cli.main(list(argv))
    assert exited.value.code == 2
    out = capsys.readouterr()
    assert out.out == ""
    return out.err


def test_an_argparse_error_is_one_line_with_the_way_to_the_usage(capsys: pytest.CaptureFixture[str]) -> None:
    err = _error(capsys, "fit", "train.py", "--hp", "num_epochs")  # KEY=VALUE without "="
    assert err == "sm-dist fit: error: argument --hp: expected KEY=VALUE, got 'num_epochs' (see sm-dist fit --help)\n"
    err = _error(capsys, "fit", "train.py", "--instance-cout", "2")
    assert err.count("\n") == 1 and err.startswith("sm-dist fit: error: unrecognized arguments: --instance-cout 2")
    err = _error(capsys, "estimate-cots")
    assert err.count("\n") == 1 and "invalid choice: 'estimate-cots'" in err and err.endswith("(see sm-dist --help)\n")


def test_a_missing_script_given_by_its_full_path_says_no_such_file(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "train.py").write_text("print('hi')\n")
    code = cli.main(["fit", str(tmp_path / "trian.py"), "--source-dir", str(tmp_path), "--local", "--dry-run"])
    assert code == 2 and capsys.readouterr().err == f"sm-dist fit: error: entry={str(tmp_path / 'trian.py')!r}: no such file\n"


def test_an_unreachable_aws_endpoint_is_one_line_not_a_bug(monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str],
                                                            aws_credentials: str) -> None:
    """botocore's own failures (no route to the endpoint, no region) are the user's setup, not sm_dist's bug: one line
    naming the job and the fix, and no "Found credentials" log line (the cloud commands run inside aws_errors)."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # the discard port: nothing listens
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    assert cli.main(["status", "some-job"]) == 1
    assert capsys.readouterr().err == ("sm-dist status: error: job some-job: cannot reach http://127.0.0.1:9/; check "
                                       "AWS_ENDPOINT_URL / network\n")
    for name in ("AWS_ENDPOINT_URL", "AWS_DEFAULT_REGION", "AWS_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")  # no profile's region either
    from sm_dist.local.clean import default_base

    assert cli.main(["logs", "some-job"]) == 2
    from sm_dist.slurm.options import SlurmOptions

    slurm_root = SlurmOptions().job_root("x").parent
    assert capsys.readouterr().err == ("sm-dist logs: error: job='some-job': no job of that name here (no local run of "
                                       f"that name under {default_base()}) or on Slurm (no job of that name under "
                                       f"{slurm_root}) or in no AWS region (region=None: set AWS_REGION, or give "
                                       "--region): check the name (and --region)\n")


def test_a_botocore_error_no_command_turned_into_its_own_is_still_one_line(monkeypatch: pytest.MonkeyPatch,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """The dispatcher's net, for a command that talks to AWS outside aws_errors: not "internal error ... a bug"."""
    from botocore.exceptions import EndpointConnectionError, NoRegionError

    import sm_dist.launch.job_cli as job_cli

    for exc, line in ((EndpointConnectionError(endpoint_url="https://x/"), 'Could not connect to the endpoint URL: '
                       '"https://x/": check the network, AWS_REGION and AWS_ENDPOINT_URL'),
                      (NoRegionError(), "region=None: set AWS_REGION (or a region in your AWS profile; --region where "
                       "the command has it)")):
        def fails(args: object, exc: Exception = exc) -> int:
            raise exc

        monkeypatch.setattr(job_cli, "register", lambda command, parser, fails=fails: (
            parser.add_argument("job"), parser.set_defaults(_run=fails)))
        assert cli.main(["status", "x"]) == 1
        assert capsys.readouterr().err == f"sm-dist status: error: {line}\n"


def test_anything_else_is_an_internal_error_in_one_line(monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    import sm_dist.launch.job_cli as job_cli

    def broken(args: object) -> int:
        raise RuntimeError("boom")

    monkeypatch.setattr(job_cli, "register", lambda command, parser: (
        parser.add_argument("job"), parser.set_defaults(_run=broken)))
    assert cli.main(["status", "x"]) == 70
    assert capsys.readouterr().err == ("sm-dist status: internal error: RuntimeError: boom (this is a bug; rerun with "
                                       "-v for the traceback)\n")


def test_a_reader_that_leaves_the_pipe_is_no_bug(monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """`sm-dist logs JOB | head`: head exits, the next print raises BrokenPipeError; that is 141, as a shell reports
    such a writer, and nothing on stderr (it said "internal error ... this is a bug")."""
    import sm_dist.launch.job_cli as job_cli

    def cut(args: object) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(job_cli, "register", lambda command, parser: (
        parser.add_argument("job"), parser.set_defaults(_run=cut)))
    assert cli.main(["logs", "x"]) == 141
    assert capsys.readouterr().err == ""
