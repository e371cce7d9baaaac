"""`sm-dist infra template | deploy | show | delete`.

Module-level imports are standard library only: `sm-dist infra --help` stays instant, and
boto3/PyYAML load only when a subcommand runs. Progress lines go to stderr, results to stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sm_dist.provision.stack import StackInfo


def register(command: str, parser: argparse.ArgumentParser) -> None:
    """Add the infra subcommands to `parser` (called by sm_dist.cli)."""
    subs = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    tpl = subs.add_parser("template", help="print the CloudFormation template")
    tpl.add_argument("--template", default=None, help="template file name in infra/ (default: sm-dist.yaml)")
    tpl.add_argument("--list", action="store_true", help="list the shipped templates instead")
    tpl.set_defaults(_run=_template)

    dep = subs.add_parser("deploy", help="create or update the stack, wait, record its outputs")
    dep.add_argument("--stack-name", required=True, help="CloudFormation stack name, e.g. sm-dist")
    dep.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                     help="template parameter (repeatable), e.g. --param BucketName=my-ckpts")
    dep.add_argument("--template", default=None, help="template file name in infra/ (default: sm-dist.yaml)")
    dep.add_argument("--json", action="store_true", help="print the result as JSON")
    dep.set_defaults(_run=_deploy)

    show = subs.add_parser("show", help="print a stack's status and outputs")
    show.add_argument("stack_name", metavar="NAME")
    show.add_argument("--json", action="store_true", help="print as JSON")
    show.set_defaults(_run=_show)

    rm = subs.add_parser("delete", help="delete the stack (refuses a non-empty bucket)")
    rm.add_argument("stack_name", metavar="NAME")
    rm.add_argument("--empty-bucket", action="store_true",
                    help="delete every object in the stack's bucket first (checkpoints are lost)")
    rm.set_defaults(_run=_delete)


def _progress(line: str) -> None:
    print(f"  {line}", file=sys.stderr, flush=True)


def _template(args: argparse.Namespace) -> int:
    from sm_dist.provision import template

    if args.list:
        print("\n".join(template.templates()))
        return 0
    sys.stdout.write(template.template_text(args.template or template.DEFAULT_TEMPLATE))
    return 0


def _print_info(info: StackInfo, as_json: bool) -> None:
    if as_json:
        from dataclasses import asdict

        print(json.dumps(asdict(info), indent=2, sort_keys=True))
        return
    print(f"stack {info.name} ({info.region}): {info.status}")
    width = max((len(key) for key in info.outputs), default=0)
    for key, value in info.outputs.items():
        print(f"  {key:<{width}}  {value}")


def _deploy(args: argparse.Namespace) -> int:
    from sm_dist.provision import config, params, stack, template

    values = params.parse_assignments(args.param)
    info = stack.deploy(
        args.stack_name, values, template_name=args.template or template.DEFAULT_TEMPLATE, on_event=_progress
    )
    if not info.changed:
        print(f"stack {info.name} is up to date (no changes)", file=sys.stderr)
    _print_info(info, args.json)
    if not args.json and stack.records_outputs(args.template or template.DEFAULT_TEMPLATE):
        print(f"recorded in {config.config_path()}; launch with: sm-dist fit ... --infra-stack {info.name}")
    elif not args.json:
        print("runs launched with chain=True (sm-dist fit --chain) in this region now go on without your machine")
    return 0


def _show(args: argparse.Namespace) -> int:
    from sm_dist.provision import stack

    _print_info(stack.show(args.stack_name), args.json)
    return 0


def _delete(args: argparse.Namespace) -> int:
    from sm_dist.provision import teardown

    status = teardown.delete(args.stack_name, empty_bucket=args.empty_bucket, on_event=_progress)
    print(f"stack {args.stack_name}: {status}")
    return 0
