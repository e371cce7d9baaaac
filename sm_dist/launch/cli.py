"""`sm-dist fit`: plan, then hand the plan to the cloud backend, or with `--local` the local one, or with
`--slurm` the Slurm one.

Module-level imports are standard library (plus sm_dist's stdlib core) so `--help` is instant;
boto3 and sagemaker load only when a command runs. `fit` flags mirror `sm_dist.fit(...)`'s
keyword arguments (generated from LaunchConfig's fields); `--config FILE` (YAML or TOML) holds
the same settings, and flags given on the command line win over the file.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import MISSING, Field, fields
from typing import Any

from sm_dist.errors import ConfigError

#: Flag help for the settings users reach for first; the rest mirror LaunchConfig's docs.
_HELP = {
    "entry": "script in --source-dir (train.py), pkg.module:function, or a bundled entrypoint (cnn.py, gpt.py)",
    "instance_type": "SageMaker training instance type, e.g. ml.p4d.24xlarge",
    "strategy": "dp, ddp, zero1, zero2, fsdp, hsdp or auto (needs --params/--model/--hf-config)",
    "params": "model size in parameters, e.g. 7e9 or 7B (memory check, auto strategy, estimate)",
    "tokens": "training tokens, e.g. 2e12 or 2T (expected duration and cost)",
    "checkpoint_s3_uri": "s3://bucket/prefix for checkpoints (required with --spot)",
    "max_cost_usd": "budget in dollars: becomes MaxRuntime (and MaxWait for spot)",
    "hang_timeout_s": "seconds without progress before every rank's stack is dumped and the workers restart "
                      "(0: off; default: 10 x the step time, 300 to 1800 s)",
    "hyperparameters": "KEY=VALUE, repeatable; reaches the script as --KEY VALUE (KEY= alone: a bare --KEY flag); "
                       "the script's own arguments, verbatim: after --, e.g. sm-dist fit train.py ... -- 3 1 --dummy",
    "environment": "KEY=VALUE, repeatable",
    "inputs": "NAME=s3://uri data channel, repeatable",
    "tags": "KEY=VALUE, repeatable",
    "output_compression": "gzip, none or auto (default: none when the model's weights reach 1 GiB, else gzip)",
    "infra_stack": "stack from `sm-dist infra deploy` for role and buckets ('' = the last one deployed)",
    "fallback_instance_types": "with --chain: another instance type to use when --instance-type has no capacity, "
                               "repeatable, in order (checked for memory like --instance-type)",
    "remote_debug": "let `sm-dist debug JOB` open a shell in the job's containers (SSM; not with --network-isolation)",
    "infra_check": "SageMaker checks the instances' hardware and network before the script "
                   "(default: on for 4+ GPU instances; adds its time to the estimate)",
    "mlflow": "SageMaker managed MLflow tracking server ARN: MlflowConfig, the script's MLFLOW_* variables, and "
              "the metric lines logged there (--local: a file store under the run's folder)",
    "training_plan_arn": "run on a SageMaker training plan's reserved capacity (its ARN); checked against the "
                         "instance type and count instead of the account's quota",
    "keep_alive_s": "keep the instances warm this many seconds after the job (0-21600, not with --spot): a "
                    "matching next job starts on them; billed while kept (sm-dist release JOB ends it)",
    "tensorboard": "TensorBoard: the script writes to $SM_TENSORBOARD_DIR (HF Trainer: report_to='tensorboard'), "
                   "synced to <output>/<job>/tensorboard while the job runs; see it with sm-dist tensorboard JOB",
}
_KV_FIELDS = ("hyperparameters", "environment", "inputs", "tags")
_SINGULAR = {"hyperparameters": "hp", "environment": "env", "inputs": "input", "tags": "tag", "metrics": "metric",
             "subnets": "subnet", "security_group_ids": "security-group-id", "ignore_patterns": "ignore",
             "fallback_instance_types": "fallback-instance-type"}
_TERMINAL_EXIT = {"Completed": 0, "Stopped": 3, "Failed": 1}


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def _flag_help(f: Field[Any], docs: dict[str, str]) -> str:
    """The flag's help: the words above for the first settings, else the setting's own docstring; its default."""
    text = _HELP.get(f.name) or docs.get(f.name) or f.name.replace("_", " ")
    default = f.default
    if default is None or default is False or default is MISSING or default in ((), "") or "default" in text.lower():
        return text.replace("%", "%%")
    shown = ", ".join(map(str, default)) if isinstance(default, tuple) else str(default)
    return f"{text} (default: {shown})".replace("%", "%%")


def _add_fit_flags(parser: argparse.ArgumentParser) -> None:
    from sm_dist.planning.config import COUNT_FIELDS, LaunchConfig, field_docs

    docs = field_docs()
    for f in fields(LaunchConfig):
        if f.name in ("entry", "args"):  # positional; the script's own args come after `--`
            continue
        kind = str(f.type)
        common: dict[str, Any] = {"dest": f.name, "default": argparse.SUPPRESS, "help": _flag_help(f, docs)}
        flag = "--" + _SINGULAR.get(f.name, f.name).replace("_", "-")
        if kind == "bool":
            parser.add_argument(flag, action="store_true", **common)
        elif kind == "bool | None":  # --infra-check / --no-infra-check; neither: the default rule
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, **common)
        elif f.name in _KV_FIELDS:
            parser.add_argument(flag, action="append", type=_key_value, metavar="KEY=VALUE", **common)
        elif kind.startswith("tuple"):
            parser.add_argument(flag, action="append", **common)
        elif f.name in COUNT_FIELDS:  # 7B, 2e12: read by LaunchConfig, as estimate-cost reads them
            parser.add_argument(flag, **common)
        elif re.search(r"\bint\b", kind) and not re.search(r"\bfloat\b", kind):
            parser.add_argument(flag, type=int, **common)
        elif re.search(r"\bfloat\b", kind):
            parser.add_argument(flag, type=float, **common)
        else:
            parser.add_argument(flag, **common)


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    from sm_dist.planning.config import LaunchConfig, load_config_file
    from sm_dist.planning.settings import flatten

    settings: dict[str, Any] = flatten(load_config_file(args.config)) if args.config else {}  # then flags win
    names = {f.name for f in fields(LaunchConfig)}
    for name, value in vars(args).items():
        if name in names:
            settings[name] = dict(value) if name in _KV_FIELDS else value
    _mlflow_names(settings, args)
    if "entry" not in settings:
        raise ConfigError("entry", None, "give the script: sm-dist fit train.py ... (or entry: in --config)")
    return settings


def _mlflow_names(settings: dict[str, Any], args: argparse.Namespace) -> None:
    """--mlflow-experiment and --mlflow-run join --mlflow's ARN (or a config file's mlflow:) as its names."""
    names = {key: value for key, value in (("experiment", getattr(args, "mlflow_experiment", None)),
                                           ("run", getattr(args, "mlflow_run", None))) if value is not None}
    if not names:
        return
    base = settings.get("mlflow")
    if base is None:
        flag = "--mlflow-experiment" if "experiment" in names else "--mlflow-run"
        raise ConfigError(flag, next(iter(names.values())), "names a run on a tracking server: add --mlflow ARN")
    settings["mlflow"] = {**({"arn": base} if isinstance(base, str) else dict(base)), **names}


def _print_json(data: object) -> None:
    print(json.dumps(data, indent=2, default=str))


def _quiet_sdk() -> None:
    """The SDK logs its defaults at INFO ("Training image URI: ..."); the plan already shows them."""
    import logging

    logging.getLogger("sagemaker").setLevel(logging.WARNING)


def _with_warm_pool(plan: Any) -> Any:
    """A cloud plan keeping a pool: whether it starts on the last one (read-only; cloud.warm_pool)."""
    import dataclasses

    import boto3

    from sm_dist.cloud.warm_pool import check_reuse

    pool = check_reuse(plan, boto3.Session(region_name=plan.region))
    return plan if pool is None else dataclasses.replace(plan, warm_pool=pool)


def run_fit(args: argparse.Namespace) -> int:
    from sm_dist.launch import api
    from sm_dist.local import cli as local_cli
    from sm_dist.slurm import cli as slurm_cli

    _quiet_sdk()
    slurm_cli.check_slurm_flags(args)
    if not args.slurm:
        local_cli.check_local_flags(args)
    settings = _settings(args)
    entry = settings.pop("entry")
    if args.slurm:
        options = slurm_cli.run_options(args)
        if args.dry_run:  # the plan made as the Slurm backend makes it, and the sbatch file it would submit
            from sm_dist.slurm.submit import job_name, script_for, with_backend

            gpus = api.slurm_gpus(settings.get("instance_type"), options)
            plan = with_backend(api.plan(entry, local=True, **settings), options, gpus)
            sbatch = script_for(plan, options, options.job_root(job_name(plan)), gpus)
            if args.json:
                assert plan.backend is not None  # with_backend named it
                _print_json({**plan.to_dict(), "price_basis": plan.backend.price_basis, "sbatch": sbatch})
            else:
                print(plan)
                print(sbatch)
            return 0
        from sm_dist.slurm.job import SlurmJob

        job = api.fit(entry, slurm=options, **settings)
        assert isinstance(job, SlurmJob)  # fit(slurm=...) returns the Slurm backend's handle
        return slurm_cli.report(job, waited=options.wait, as_json=args.json)
    if args.dry_run:
        plan = api.plan(entry, local=args.local, **settings)
        if not args.local:
            plan = _with_warm_pool(plan)
        _print_json(plan.to_dict()) if args.json else print(plan)
        return 0
    if args.local:  # the backends by hand, as fit hands them the plan: each one's own handle, typed as such
        from sm_dist.local import api as local_backend

        return local_cli.report(local_backend.run(api.plan(entry, local=True, **settings), local_cli.run_options(args)),
                                as_json=args.json)
    from sm_dist.cloud import submit as cloud_backend

    planned = api.plan(entry, **settings)
    result = cloud_backend.run(planned, validate_role=not args.no_validate_role)
    launched = result.plan or planned  # what was submitted (its warm-pool line)
    if args.json:
        _print_json({"job_name": result.name, "plan": launched.to_dict()})
    else:
        print(launched)
        print(f"\nlaunched {result.name}; follow it with: sm-dist logs {result.name} --follow")
    if args.wait:
        return _TERMINAL_EXIT.get(result.wait(out=sys.stderr if args.json else sys.stdout).status, 1)
    return 0


def register(command: str, parser: argparse.ArgumentParser) -> None:
    """Add `sm-dist fit`'s arguments to `parser` (called by sm_dist.cli)."""
    from sm_dist.local.cli import add_local_flags
    from sm_dist.slurm.cli import add_slurm_flags

    parser.add_argument("entry", nargs="?", default=argparse.SUPPRESS, help=_HELP["entry"])
    parser.add_argument("--config", help="YAML or TOML file with the same settings (flags win)")
    parser.add_argument("--dry-run", action="store_true", help="print the plan; upload and create nothing")
    parser.add_argument("--json", action="store_true", help="print the plan as JSON")
    parser.add_argument("--wait", action="store_true", help="wait for the job to end (exit 0 completed, 1 failed, 3 stopped)")
    parser.add_argument("--local", action="store_true", help="run the job on this machine (CPU, emulated hosts)")
    parser.add_argument("--no-validate-role", action="store_true", help="skip the SDK's IAM permission check")
    _add_fit_flags(parser)
    parser.add_argument("--mlflow-experiment", help="with --mlflow: the MLflow experiment (default: --base-job-name's)")
    parser.add_argument("--mlflow-run", help="with --mlflow: the MLflow run's name (default: the job's name)")
    add_local_flags(parser)
    add_slurm_flags(parser)
    parser.set_defaults(_run=run_fit)


__all__ = ["register"]
