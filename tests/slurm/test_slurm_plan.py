"""The Slurm backend's pure parts: the sbatch file, the options, the cluster's answers read, a node's
layout, and the refusals that need no cluster (no sbatch on PATH). Fast: no process is started."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

import sm_dist
from sm_dist import cli
from sm_dist.container import slurm_host
from sm_dist.contract.container import LOCAL_ADDR_ENV, OPT_ML_ENV, RDZV_HOST_ENV, RDZV_PORT_ENV, read_checkpoint_config
from sm_dist.contract.slurm_layout import CODE_FOLDER, CONFIG_FOLDER, HOSTS_FOLDER, JOB_FILE
from sm_dist.errors import ConfigError, RuntimeEnvError
from sm_dist.slurm import cluster
from sm_dist.slurm.job import SlurmJob
from sm_dist.slurm.options import SlurmOptions
from sm_dist.slurm.script import batch_script, directives, time_limit

ENTRYPOINTS = Path(__file__).resolve().parents[2] / "entrypoints"
#: `scontrol show partition -o` of the test cluster (tests/_slurm.py), Slurm 22.05, abridged.
PARTITION_LINE = ("PartitionName=debug AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL AllocNodes=ALL Default=YES "
                  "QoS=N/A DefaultTime=NONE MaxNodes=UNLIMITED MaxTime=UNLIMITED MinNodes=0 Nodes=sm-n[1-2] "
                  "State=UP TotalCPUs=4 TotalNodes=2 SelectTypeParameters=NONE")
GPU_LINE = ("PartitionName=gpu AllowGroups=ALL Default=NO MaxNodes=4 MaxTime=2-00:00:00 Nodes=p5-[001-016] State=UP "
            "TotalNodes=16")


def test_dry_run_prints_the_sbatch_file_and_creates_nothing(tmp_path: Path, capsys) -> None:
    code = cli.main(["fit", "cnn.py", "--source-dir", str(ENTRYPOINTS), "--slurm", "--slurm-root", str(tmp_path),
                     "--instance-type", "ml.p4d.24xlarge", "--instance-count", "2", "--max-runtime-s", "3600",
                     "--partition", "gpu", "--account", "ml", "--dry-run"])
    out = capsys.readouterr().out
    assert code == 0
    for line in ("#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=1", "#SBATCH --exclusive", "#SBATCH --partition=gpu",
                 "#SBATCH --account=ml", "#SBATCH --gpus-per-node=8", "#SBATCH --time=0-01:00:00",
                 "#SBATCH --signal=TERM@120", "#SBATCH --requeue", "AUTO_RESUME=(--auto-resume=1)"):
        assert line in out, line
    assert "-m sm_dist.container.slurm_host" in out and "-m sm_dist.container.pid1" in out
    # the plan names the Slurm backend, not local mode, and which rates priced it (HyperPod's are unknown)
    job = re.search(r"^job +(\S+)", out, re.M)
    assert job is not None and "runs on this machine (sm_dist.local)" not in out
    folder = tmp_path / job.group(1)
    assert (f"slurm        sbatch to partition gpu (account ml): 2 nodes, one task each, 8 GPUs each; --time "
            f"0-01:00:00, SIGTERM 120 s before it (saved, then requeued as the next link, at most 4); code and each "
            f"node's /opt/ml in {folder}; checkpoints in {folder}/checkpoints;") in out
    assert "  basis        SageMaker training's on-demand rates for the instance type, a stand-in" in out
    assert "local mode syncs checkpoints" not in out  # local mode's warning: the Slurm line says where they go
    assert list(tmp_path.iterdir()) == []  # a dry run stages nothing


def test_a_json_dry_run_names_the_backend_and_its_price_basis(tmp_path: Path, capsys) -> None:
    code = cli.main(["fit", "cnn.py", "--source-dir", str(ENTRYPOINTS), "--slurm", "--slurm-root", str(tmp_path),
                     "--slurm-checkpoints", str(tmp_path / "ckpt"), "--dry-run", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["backend"]["name"] == "slurm" and data["price_basis"] == data["backend"]["price_basis"]
    where = data["backend"]["where"]
    assert where.startswith("sbatch to the cluster's default partition: 1 node, one task each; --time ")
    assert "or the partition's MaxTime when shorter" in where and where.endswith(f"checkpoints in {tmp_path / 'ckpt'}")
    assert data["sbatch"].startswith("#!/bin/bash")


def test_no_gpus_asked_unless_an_instance_type_or_the_option_says(tmp_path: Path, capsys) -> None:
    cli.main(["fit", "cnn.py", "--source-dir", str(ENTRYPOINTS), "--slurm", "--slurm-root", str(tmp_path),
              "--dry-run"])
    assert "--gpus-per-node" not in capsys.readouterr().out
    cli.main(["fit", "cnn.py", "--source-dir", str(ENTRYPOINTS), "--slurm", "--slurm-root", str(tmp_path),
              "--gpus-per-node", "4", "--dry-run"])
    assert "#SBATCH --gpus-per-node=4" in capsys.readouterr().out


def test_no_sbatch_on_path_is_one_line_before_anything_is_staged(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(ConfigError, match="no sbatch on PATH"):
        sm_dist.fit("cnn.py", source_dir=str(ENTRYPOINTS), slurm={"root": tmp_path / "jobs"})
    code = cli.main(["fit", "cnn.py", "--source-dir", str(ENTRYPOINTS), "--slurm", "--slurm-root",
                     str(tmp_path / "jobs")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0 and "slurm='sbatch': no sbatch on PATH" in err, err
    assert not (tmp_path / "jobs").exists()


def test_a_slurm_conf_that_is_no_file_is_one_line_at_once(tmp_path: Path, monkeypatch, capsys) -> None:
    """Slurm's clients retry a missing SLURM_CONF for 60 s, then fail in three lines (docs/PLATFORM.md §12)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for client in ("sbatch", "scontrol"):  # never run: the refusal comes first
        (bin_dir / client).write_text("#!/bin/sh\nexit 9\n", encoding="utf-8")
        (bin_dir / client).chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "nowhere.conf"))
    monkeypatch.setattr(cluster, "_run", lambda *a, **k: pytest.fail("a Slurm client was run"))
    code = cli.main(["fit", "cnn.py", "--source-dir", str(ENTRYPOINTS), "--slurm", "--slurm-root",
                     str(tmp_path / "jobs")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err == (f"sm-dist fit: error: SLURM_CONF='{tmp_path / 'nowhere.conf'}': no such file: point "
                                 "it at the cluster's slurm.conf, or unset it (the clients then read the one they "
                                 "were built with)")
    assert not (tmp_path / "jobs").exists()


def test_unmet_requirements_are_one_line_before_anything_is_staged(tmp_path: Path, monkeypatch, capsys) -> None:
    """The nodes run this Python and pip-install nothing: a requirements.txt it does not meet is refused, naming
    the package and the environment, before the job folder is written or sbatch runs."""
    source = tmp_path / "src"
    source.mkdir()
    (source / "train.py").write_text("print('hi')\n", encoding="utf-8")
    (source / "requirements.txt").write_text("packaging\nsm-dist-no-such-package==1.0\n", encoding="utf-8")
    monkeypatch.setattr(cluster, "sbatch_path", lambda: "/usr/bin/sbatch")  # the cluster's answers, no process
    monkeypatch.setattr(cluster, "partitions", lambda: cluster.read_partitions(PARTITION_LINE))
    monkeypatch.setattr(cluster, "submit", lambda script: pytest.fail("submitted"))
    code = cli.main(["fit", "train.py", "--source-dir", str(source), "--slurm", "--slurm-root", str(tmp_path / "jobs")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert err == (f"sm-dist fit: error: requirements.txt='sm-dist-no-such-package==1.0 (not installed)': the Slurm "
                   f"nodes run this Python environment ({sys.executable}) and install nothing; pip install -r "
                   f"{source / 'requirements.txt'} into it")  # packaging is installed: not named
    assert not (tmp_path / "jobs").exists()


def test_slurm_flags_need_slurm_and_local_ones_are_refused_with_it(capsys) -> None:
    assert cli.main(["fit", "cnn.py", "--partition", "gpu", "--dry-run"]) == 2
    assert "--partition='gpu': only with --slurm" in capsys.readouterr().err
    assert cli.main(["fit", "cnn.py", "--slurm", "--local", "--dry-run"]) == 2
    assert "leave out --local" in capsys.readouterr().err
    assert cli.main(["fit", "cnn.py", "--slurm", "--local-root", "/tmp/x", "--dry-run"]) == 2
    assert "--local-root='/tmp/x': only with --local" in capsys.readouterr().err


def test_time_limit_is_whole_minutes_rounded_up() -> None:
    assert time_limit(None) is None and time_limit(0) is None
    assert time_limit(90) == "0-00:02:00"
    assert time_limit(2 * 86400 + 1) == "2-00:01:00"


def test_directives_and_the_chains_requeue() -> None:
    got = directives(job_name="j", nodes=4, job_dir=Path("/fsx/j"), qos="high", signal_s=300, extra=["--mem=0"])
    assert got[:4] == ["--job-name=j", "--nodes=4", "--ntasks-per-node=1", "--exclusive"]
    assert "--qos=high" in got and "--signal=TERM@300" in got and got[-1] == "--mem=0"
    assert not any(d.startswith(("--time", "--gpus")) for d in got)
    text = batch_script(job_name="j", nodes=2, job_dir=Path("/fsx/j"), python="/venv/bin/python",
                        container_command=["python3", "-m", "sm_dist.container.pid1"])
    assert "/venv/bin/python -m sm_dist.container.pid1" in text  # the submitting Python on every node
    # the requeue is the chain's decision (tests/slurm/test_slurm_chain.py), not a count in the script
    assert ('if /venv/bin/python -m sm_dist.container.slurm_chain "$JOB_DIR" "$rc" "$SECONDS"; then\n'
            '    scontrol requeue "$SLURM_JOB_ID"\nfi\nexit $rc\n') in text


def test_partitions_are_read_and_checked() -> None:
    found = cluster.read_partitions(f"{PARTITION_LINE}\n{GPU_LINE}\n")
    assert [(p.name, p.total_nodes, p.default, p.max_nodes, p.max_time_min) for p in found] == [
        ("debug", 2, True, None, None), ("gpu", 16, False, 4, 2880)]
    assert cluster.check_fits(found, None, 2, None).name == "debug"
    with pytest.raises(ConfigError, match=r"partition='gpus': no such partition here \(did you mean 'gpu'\?\); partitions: debug, gpu"):
        cluster.check_fits(found, "gpus", 1, None)
    with pytest.raises(ConfigError, match="instance_count=5: partition gpu gives a job at most 4 nodes"):
        cluster.check_fits(found, "gpu", 5, None)
    with pytest.raises(ConfigError, match="max_runtime_s=180000: partition gpu allows 2880 minutes"):
        cluster.check_fits(found, "gpu", 2, 3000)
    with pytest.raises(ConfigError, match="no default partition"):
        cluster.check_fits(found[1:], None, 1, None)


@pytest.mark.parametrize(("options", "message"), [
    ({"chaos": "sigterm:4"}, "a Slurm job takes kill:STEP"),
    ({"chaos": ["kill:4", "kill:20s"]}, "give one kill:STEP or kill:SECONDSs"),
    ({"verify": True, "wait": False}, "verify=True: compares two finished runs"),
    ({"partition": "gpu large"}, "expected a Slurm name without spaces"),
    ({"partiton": "gpu"}, "slurm.partiton='gpu': not an option (did you mean 'partition'?)"),
    ({"gpus_per_node": -1}, "gpus_per_node=-1"),
])
def test_options_refuse_bad_values(options: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        SlurmOptions.coerce(options)


def test_the_states_a_user_must_act_on_are_said_plainly(tmp_path: Path, monkeypatch) -> None:
    job = SlurmJob("j", tmp_path, "7", nodes=2, checkpoint_uri=None)
    answers = {"JobState": "PENDING", "Reason": "ReqNodeNotAvail,_UnavailableNodes:sm-n2", "ExitCode": "0:0"}
    monkeypatch.setattr(cluster, "job_record", lambda job_id: dict(answers))
    status = job.status()
    assert (status.status, status.secondary) == ("InProgress", "Pending")
    assert "waiting for nodes: ReqNodeNotAvail,_UnavailableNodes:sm-n2" in status.message
    for state, secondary, words in (("TIMEOUT", "MaxRuntimeExceeded", "ran past its time limit"),
                                    ("NODE_FAIL", "NodeFailure", "one of its nodes failed"),
                                    ("OUT_OF_MEMORY", "OutOfMemory", "ran out of host memory")):
        answers.update(JobState=state, Reason="None", ExitCode="0:9")
        status = job.status()
        assert (status.status, status.secondary) == ("Failed", secondary) and words in (status.failure_reason or "")
    answers.update(JobState="PREEMPTED")
    assert (job.status().status, job.status().secondary) == ("Stopped", "Preempted")
    failure = tmp_path / HOSTS_FOLDER / "sm-n2" / "output" / "failure"
    failure.parent.mkdir(parents=True)
    failure.write_text("ValueError: bad at train.py:5", encoding="utf-8")
    answers.update(JobState="FAILED", ExitCode="1:0")
    assert job.status().failure_reason == "sm-n2: ValueError: bad at train.py:5"
    monkeypatch.setattr(cluster, "job_record", lambda job_id: None)  # Slurm forgot the job: its exit record
    (tmp_path / "exits").write_text("0 0\n", encoding="utf-8")
    assert job.status().status == "Completed"
    (tmp_path / "exits").write_text("0 143\nstopped stopped\n", encoding="utf-8")  # sm-dist stop's record
    assert (job.status().status, job.summary().attempts) == ("Stopped", 1)


def test_job_ports_follow_the_job_id() -> None:
    assert slurm_host.job_ports("12345") == (17345, 27345)
    assert slurm_host.job_ports("7") == (15007, 25007)


def test_a_node_name_that_does_not_resolve_is_read_from_slurms_table() -> None:
    class Done:
        stdout = "NodeName=gpu-st-p5-1 Arch=x86_64 NodeAddr=10.1.2.3 NodeHostName=gpu-st-p5-1 Port=6818\n"

    assert slurm_host.node_address("localhost") == "localhost"
    assert slurm_host.node_address("sm-dist-no-such-node.invalid", run=lambda *a, **k: Done()) == "10.1.2.3"

    class Nothing:
        stdout = ""

    with pytest.raises(RuntimeEnvError, match="names no NodeAddr"):
        slurm_host.node_address("sm-dist-no-such-node.invalid", run=lambda *a, **k: Nothing())


def test_a_node_is_laid_out_like_opt_ml(tmp_path: Path, monkeypatch) -> None:
    job_dir = tmp_path / "job"
    (job_dir / CODE_FOLDER).mkdir(parents=True)
    (job_dir / CONFIG_FOLDER).mkdir()
    data = tmp_path / "data"
    data.mkdir()
    (job_dir / CONFIG_FOLDER / JOB_FILE).write_text(json.dumps({
        "job_name": "j", "instance_type": "ml.p5.48xlarge", "channels": {"train": str(data)},
        "environment": {"PYTHONPATH": "/opt/ml/input/data/code"}}), encoding="utf-8")
    (job_dir / CONFIG_FOLDER / "hyperparameters.json").write_text('{"steps": "8"}', encoding="utf-8")
    shared = tmp_path / "shared-checkpoints"
    (job_dir / CONFIG_FOLDER / "checkpointconfig.json").write_text(json.dumps({"LocalPath": str(shared)}))
    monkeypatch.setattr(slurm_host, "node_address", lambda name, run=None: {"n10": "10.0.0.10", "n9": "10.0.0.9"}[name])
    root = slurm_host.lay_out(job_dir, "n9", ["n9", "n10"])
    resource = json.loads((root / "input/config/resourceconfig.json").read_text())
    assert resource["hosts"] == ["n10", "n9"] and resource["current_host"] == "n9"  # SageMaker's order: as text
    assert json.loads((root / "input/config/hyperparameters.json").read_text()) == {"steps": "8"}
    assert (root / "input/data/code").resolve() == (job_dir / CODE_FOLDER).resolve()
    assert (root / "input/data/train").resolve() == data.resolve()
    env = slurm_host.host_env(job_dir, root, {"SLURM_JOB_ID": "42"}, ["n9", "n10"], "n9")
    assert env[OPT_ML_ENV] == str(root) and env[RDZV_HOST_ENV] == "10.0.0.10" and env[LOCAL_ADDR_ENV] == "10.0.0.9"
    assert env[RDZV_PORT_ENV] == "15042" and env["TRAINING_JOB_NAME"] == "j"
    assert env["PYTHONPATH"] == f"{root}/input/data/code"
    # SM_CHECKPOINT_DIR on every node: the one shared folder (a path outside /opt/ml is not remapped)
    assert read_checkpoint_config(root).local_path == str(shared)


def test_the_checkpoint_folder_in_a_scripts_arguments_is_the_jobs_shared_one() -> None:
    from sm_dist.jobspec import JobSpec
    from sm_dist.slurm.submit import shared_checkpoint_args

    spec = JobSpec(entry="train.py", args=("--out", "/opt/ml/checkpoints/run"),
                   hyperparameters={"checkpoint-dir": "/opt/ml/checkpoints", "model-dir": "/opt/ml/model", "x": "1"})
    moved = shared_checkpoint_args(spec, "/opt/ml/checkpoints", Path("/fsx/sm-dist/j/checkpoints"))
    assert moved.args == ("--out", "/fsx/sm-dist/j/checkpoints/run")
    assert moved.hyperparameters == {"checkpoint-dir": "/fsx/sm-dist/j/checkpoints", "model-dir": "/opt/ml/model",
                                     "x": "1"}


def test_a_default_run_time_takes_the_partitions_max_time_and_a_given_one_is_kept(tmp_path: Path) -> None:
    """Most clusters set a MaxTime (a cluster set up elsewhere had `MaxTime=02:00:00`): the planner's 24 h default
    becomes the partition's limit instead of a refusal; a max_runtime_s the user gave is never changed."""
    from sm_dist.slurm.submit import fit_to_partition, runtime_by_default, script_for

    two_hours = cluster.read_partitions(GPU_LINE.replace("MaxTime=2-00:00:00", "MaxTime=02:00:00"))[0]
    plan = sm_dist.plan("cnn.py", source_dir=str(ENTRYPOINTS), local=True)
    assert runtime_by_default(plan) and plan.limits.max_runtime_s == 86400
    fitted = fit_to_partition(plan, two_hours)
    assert fitted.limits.max_runtime_s == 7200 and "partition gpu's MaxTime (120 min" in fitted.limits.basis
    assert "#SBATCH --time=0-02:00:00" in script_for(fitted, SlurmOptions(), tmp_path / "j", 0)
    assert fit_to_partition(plan, cluster.read_partitions(PARTITION_LINE)[0]) is plan  # UNLIMITED: as planned
    given = sm_dist.plan("cnn.py", source_dir=str(ENTRYPOINTS), local=True, max_runtime_s=36000)
    assert not runtime_by_default(given) and fit_to_partition(given, two_hours) is given


ARN = "arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/t"


@pytest.mark.parametrize(("flags", "line"), [
    ([], "output       each node's model/ stays in {job}/hosts/<node>/model, in the shared folder; nothing is uploaded"),
    ([], "checkpoints  shared folder {job}/checkpoints: every node's $SM_CHECKPOINT_DIR, rank 0 commits each checkpoint"),
    (["--tensorboard"], "tensorboard  $SM_TENSORBOARD_DIR on each node is {job}/hosts/<node>/output/tensorboard, in the "
                        "shared folder, not synced to S3; sm-dist tensorboard {name} shows every node's"),
    (["--remote-debug"], "debug        SageMaker's remote debug (SSM) is not on a Slurm cluster: a shell on a node of "
                         "the running job, its /opt/ml folder and the script's variables, is sm-dist debug {name} --host "
                         "NODE (srun --overlap beside the job); every rank's stack: sm-dist stacks {name}"),
    (["--infra-check"], "(assumed); a Slurm job runs no such check"),
    (["--mlflow", ARN], "MLFLOW_TRACKING_URI for every node's script: this Python environment, the nodes', needs mlflow "
                        "and sagemaker-mlflow"),
    (["--input", "train={data}"], "data         train: {data} (1 files, 0.0 MiB; read in place: every node's "
                                  "/opt/ml/input/data/<channel> links to the folder"),
])
def test_a_slurm_plans_lines_say_what_a_node_does(flags: list[str], line: str, tmp_path: Path, capsys) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text("x", encoding="utf-8")
    code = cli.main(["fit", "cnn.py", "--source-dir", str(ENTRYPOINTS), "--slurm", "--slurm-root", str(tmp_path / "root"),
                     *(flag.format(data=data) for flag in flags), "--dry-run"])
    out = capsys.readouterr().out
    name = re.search(r"^job +(\S+)", out, re.M)
    assert code == 0 and name is not None
    assert line.format(job=tmp_path / "root" / name.group(1), name=name.group(1), data=data) in out, out
    assert "local mode" not in out and "copied to every host here" not in out and "emulated host" not in out


def test_an_s3_channel_is_refused_in_one_line_by_a_dry_run_too(tmp_path: Path, capsys) -> None:
    code = cli.main(["fit", "cnn.py", "--source-dir", str(ENTRYPOINTS), "--slurm", "--slurm-root", str(tmp_path / "root"),
                     "--input", "train=s3://my-bucket/train", "--dry-run"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert ("link the bucket to the cluster's FSx for Lustre (a data repository association) and give its folder "
            "(train=/fsx/...), or copy it into one (aws s3 sync s3://my-bucket/train /fsx/data/train)") in err, err
    assert not (tmp_path / "root").exists()


def test_tensorboard_gives_every_node_its_own_folder_in_the_shared_one(tmp_path: Path, monkeypatch) -> None:
    from sm_dist.contract.container import read_tensorboard_dir
    from sm_dist.slurm import submit

    plan = sm_dist.plan(str(ENTRYPOINTS / "cnn.py"), local=True, instance_count=2, tensorboard=True)
    job_dir = tmp_path / "job"
    submit.stage(plan, SlurmOptions(root=tmp_path), job_dir, 0, "job")
    monkeypatch.setattr(slurm_host, "node_address", lambda name, run=None: "10.0.0.9")
    root = slurm_host.lay_out(job_dir, "n9", ["n9"])
    assert read_tensorboard_dir(root) == str(root / "output" / "tensorboard")  # SM_TENSORBOARD_DIR's folder
