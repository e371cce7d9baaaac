"""The shipped templates: cfn-lint clean, and the hardening moto's CloudFormation does not apply.

moto ignores a bucket's PublicAccessBlock, lifecycle, versioning and bucket policies (docs/PLATFORM.md §5),
so those are asserted on the parsed template here; test_deploy.py checks what moto does apply.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sm_dist.provision import template

pytest.importorskip("yaml")
TEMPLATES = template.templates()


def _cfn_lint() -> list[str]:
    found = shutil.which("cfn-lint") or str(Path(sys.executable).with_name("cfn-lint"))
    if not Path(found).exists():
        pytest.skip("cfn-lint is not installed (pip install -e '.[dev]')")
    return [found]


@pytest.mark.slow
@pytest.mark.parametrize("name", TEMPLATES)
def test_cfn_lint_reports_nothing(name: str) -> None:
    # --include-checks I: informational findings count too.
    cmd = [*_cfn_lint(), "--include-checks", "I", "--", str(template.template_path(name))]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_templates_are_found_through_resource_dir() -> None:
    assert "sm-dist.yaml" in TEMPLATES


@pytest.mark.parametrize("name", TEMPLATES)
def test_description_carries_the_marker_deploy_and_delete_check(name: str) -> None:
    from sm_dist.provision.outputs import DESCRIPTION_MARKER

    assert template.load(name)["Description"].startswith(DESCRIPTION_MARKER)


@pytest.fixture
def tpl() -> dict[str, Any]:
    return template.load()


def _statements(policy_doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Statements of a policy document; a statement wrapped in !If yields its 'true' branch."""
    out = []
    for stmt in policy_doc["Statement"]:
        out.append(stmt["Fn::If"][1] if "Fn::If" in stmt else stmt)
    return out


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def test_public_access_blocked_on_all_four_settings(tpl: dict[str, Any]) -> None:
    pab = tpl["Resources"]["Bucket"]["Properties"]["PublicAccessBlockConfiguration"]
    assert pab == {"BlockPublicAcls": True, "BlockPublicPolicy": True, "IgnorePublicAcls": True, "RestrictPublicBuckets": True}


def test_bucket_owner_enforced_and_default_encryption(tpl: dict[str, Any]) -> None:
    props = tpl["Resources"]["Bucket"]["Properties"]
    assert props["OwnershipControls"]["Rules"] == [{"ObjectOwnership": "BucketOwnerEnforced"}]
    sse = props["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]["ServerSideEncryptionByDefault"]
    assert sse["SSEAlgorithm"] == {"Fn::If": ["UseKms", "aws:kms", "AES256"]}
    assert tpl["Parameters"]["KmsKeyArn"]["Default"] == ""  # S3-managed keys unless a key is given


def test_lifecycle_expires_checkpoints_and_aborts_uploads(tpl: dict[str, Any]) -> None:
    rules = {r["Id"]: r for r in tpl["Resources"]["Bucket"]["Properties"]["LifecycleConfiguration"]["Rules"]}
    expire = rules["expire-old-checkpoints"]
    assert expire["Status"] == "Enabled"
    assert expire["ExpirationInDays"] == {"Ref": "CheckpointRetentionDays"}
    assert expire["Prefix"] == {"Fn::If": ["HasPrefix", {"Fn::Sub": "${Prefix}/checkpoints/"}, "checkpoints/"]}
    abort = rules["abort-incomplete-multipart-uploads"]
    assert abort["Status"] == "Enabled" and "Prefix" not in abort
    assert abort["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 7}
    noncurrent = rules["expire-noncurrent-versions"]
    assert "Prefix" not in noncurrent
    assert noncurrent["NoncurrentVersionExpiration"] == {"NoncurrentDays": {"Ref": "CheckpointRetentionDays"}}


def test_versioning_is_optional_and_off_by_default(tpl: dict[str, Any]) -> None:
    assert tpl["Parameters"]["Versioning"]["Default"] == "false"
    versioning = tpl["Resources"]["Bucket"]["Properties"]["VersioningConfiguration"]
    assert versioning["Fn::If"][:2] == ["UseVersioning", {"Status": "Enabled"}]


def test_bucket_policy_denies_everything_without_tls(tpl: dict[str, Any]) -> None:
    policy = tpl["Resources"]["BucketPolicy"]["Properties"]
    assert policy["Bucket"] == {"Ref": "Bucket"}
    (stmt,) = policy["PolicyDocument"]["Statement"]
    assert stmt["Effect"] == "Deny" and stmt["Principal"] == "*" and stmt["Action"] == "s3:*"
    assert stmt["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert stmt["Resource"] == [{"Fn::GetAtt": ["Bucket", "Arn"]}, {"Fn::Sub": "${Bucket.Arn}/*"}]


def test_role_is_trusted_by_sagemaker_only(tpl: dict[str, Any]) -> None:
    trust = tpl["Resources"]["TrainingRole"]["Properties"]["AssumeRolePolicyDocument"]
    assert trust["Statement"] == [
        {"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"}
    ]
    assert "ManagedPolicyArns" not in tpl["Resources"]["TrainingRole"]["Properties"]


def _role_statements(tpl: dict[str, Any]) -> list[dict[str, Any]]:
    stmts = []
    for policy in tpl["Resources"]["TrainingRole"]["Properties"]["Policies"]:
        stmts += _statements(policy["PolicyDocument"])
    stmts += _statements(tpl["Resources"]["VpcPolicy"]["Properties"]["PolicyDocument"])
    return stmts


def _names_only_our_bucket(resource: Any) -> bool:
    """True when a (possibly !If-wrapped) resource is the stack's bucket or a key under it."""
    if isinstance(resource, dict) and "Fn::If" in resource:
        return all(_names_only_our_bucket(r) for r in resource["Fn::If"][1:])
    if resource == {"Fn::GetAtt": ["Bucket", "Arn"]}:
        return True
    return isinstance(resource, dict) and str(resource.get("Fn::Sub", "")).startswith("${Bucket.Arn}/")


def test_s3_statements_name_only_the_bucket(tpl: dict[str, Any]) -> None:
    """Writes only in the stack's bucket; other buckets (DataBuckets) are read-only: list, locate, get."""
    s3 = [s for s in _role_statements(tpl) if any(a.startswith("s3:") for a in _as_list(s["Action"]))]
    assert {s["Sid"] for s in s3} == {"ListOwnPrefix", "LocateBucket", "ReadWriteOwnObjects",
                                      "ListDataBuckets", "ReadDataObjects"}
    data = [s for s in s3 if s["Sid"] in ("ListDataBuckets", "ReadDataObjects")]
    assert {a for s in data for a in _as_list(s["Action"])} == {"s3:ListBucket", "s3:GetBucketLocation", "s3:GetObject"}
    for stmt in (s for s in s3 if s not in data):
        assert all(a.startswith("s3:") for a in _as_list(stmt["Action"]))
        assert "s3:*" not in _as_list(stmt["Action"])
        assert all(_names_only_our_bucket(r) for r in _as_list(stmt["Resource"])), stmt


def test_wildcard_resources_only_where_unavoidable(tpl: dict[str, Any]) -> None:
    unavoidable = {"ecr:GetAuthorizationToken", "cloudwatch:PutMetricData",  # no resource ARN for these
                   *(f"ssmmessages:{a}{c}Channel" for a in ("Create", "Open") for c in ("Control", "Data"))}
    for stmt in _role_statements(tpl):
        if "*" in _as_list(stmt["Resource"]):
            actions = set(_as_list(stmt["Action"]))
            assert all(a in unavoidable or a.startswith("ec2:Describe") for a in actions), stmt


def test_metrics_limited_to_the_training_job_namespace(tpl: dict[str, Any]) -> None:
    (stmt,) = [s for s in _role_statements(tpl) if s["Sid"] == "TrainingJobMetrics"]
    assert stmt["Condition"] == {"StringEquals": {"cloudwatch:namespace": "/aws/sagemaker/TrainingJobs"}}


def test_vpc_permissions_only_with_vpc_mode(tpl: dict[str, Any]) -> None:
    assert tpl["Conditions"]["UseVpc"] == {"Fn::Equals": [{"Ref": "VpcMode"}, "true"]}
    assert tpl["Parameters"]["VpcMode"]["Default"] == "false"
    assert tpl["Resources"]["VpcPolicy"]["Condition"] == "UseVpc"
    for policy in tpl["Resources"]["TrainingRole"]["Properties"]["Policies"]:
        assert not any(a.startswith("ec2:") for s in _statements(policy["PolicyDocument"]) for a in _as_list(s["Action"]))


def test_outputs_are_what_resolve_reads(tpl: dict[str, Any]) -> None:
    from sm_dist.provision.outputs import OUTPUT_KEYS

    assert set(tpl["Outputs"]) == set(OUTPUT_KEYS)


def test_short_tags_parse_to_long_form() -> None:
    text = "A: !GetAtt R.Arn\nB: !Sub ['${X}', {X: !Ref Y}]\nC: !If [c, !Ref AWS::NoValue, 1]\n"
    assert template.parse(text) == {
        "A": {"Fn::GetAtt": ["R", "Arn"]},
        "B": {"Fn::Sub": ["${X}", {"X": {"Ref": "Y"}}]},
        "C": {"Fn::If": ["c", {"Ref": "AWS::NoValue"}, 1]},
    }


# --- the ECR pull permission follows the image table (docs/PLATFORM.md §7.4) ---

_NO_VALUE = object()


def _render(node: Any, params: dict[str, str], tpl: dict[str, Any]) -> Any:
    """The value CloudFormation gives `node` for these parameters (the functions this template uses)."""
    if isinstance(node, list):
        return [v for v in (_render(n, params, tpl) for n in node) if v is not _NO_VALUE]
    if not isinstance(node, dict) or len(node) != 1:
        return node
    (fn, arg), = node.items()
    if fn == "Ref":
        return _NO_VALUE if arg == "AWS::NoValue" else params[arg]
    if fn == "Fn::Sub":
        text, extra = (arg, {}) if isinstance(arg, str) else (arg[0], arg[1])
        scope = {**params, **{k: _render(v, params, tpl) for k, v in extra.items()}}
        return re.sub(r"\$\{([\w:]+)\}", lambda m: scope[m.group(1)], text)
    if fn == "Fn::If":  # only the branch the condition picks
        return _render(arg[1] if _render(tpl["Conditions"][arg[0]], params, tpl) else arg[2], params, tpl)
    args = _render(arg, params, tpl)
    if fn == "Fn::Split":
        return args[1].split(args[0])
    if fn == "Fn::Select":
        return args[1][int(args[0])]
    if fn == "Fn::Join":
        return args[0].join(args[1])
    if fn == "Fn::Equals":
        return args[0] == args[1]
    if fn == "Fn::Not":
        return not args[0]
    raise AssertionError(f"the renderer does not know {fn}")


def _pull_statement(tpl: dict[str, Any]) -> dict[str, Any]:
    return next(s for s in _role_statements(tpl) if s["Sid"] == "PullTrainingImage")


def _params_for(region: str, tpl: dict[str, Any]) -> dict[str, str]:
    from sm_dist.provision.params import image_parameters

    defaults = {k: str(v.get("Default", "")) for k, v in tpl["Parameters"].items()}
    partition = "aws-cn" if region.startswith("cn-") else "aws"
    return {**defaults, **image_parameters(region), "AWS::Region": region, "AWS::Partition": partition}


@pytest.mark.parametrize("region", __import__("sm_dist.catalog.images", fromlist=["x"]).known_regions())
def test_the_role_may_pull_every_image_of_the_table_in_every_region(tpl: dict[str, Any], region: str) -> None:
    from sm_dist.catalog.images import known_versions, training_image
    from sm_dist.contract import torch_support
    from sm_dist.planning.constraints import check_image_pull

    allowed = tuple(_render(_pull_statement(tpl)["Resource"], _params_for(region, tpl), tpl))
    assert len(allowed) == 2 and all(a.startswith("arn:aws") and f":ecr:{region}:" in a for a in allowed)
    for version in known_versions():
        if torch_support.refusal(version) is None:
            for gpu in (True, False):
                uri = training_image(version, region, gpu=gpu).uri
                assert check_image_pull(uri, allowed, "s") == [], (region, uri)


def test_a_region_with_its_own_registry_gets_its_own_account(tpl: dict[str, Any]) -> None:
    allowed = _render(_pull_statement(tpl)["Resource"], _params_for("il-central-1", tpl), tpl)
    assert allowed == ["arn:aws:ecr:il-central-1:780543022126:repository/pytorch",
                       "arn:aws:ecr:il-central-1:780543022126:repository/pytorch-training"]
    china = _render(_pull_statement(tpl)["Resource"], _params_for("cn-north-1", tpl), tpl)
    assert china[0] == "arn:aws-cn:ecr:cn-north-1:727897471807:repository/pytorch"


def test_the_template_defaults_pull_the_default_image_in_us_east_1(tpl: dict[str, Any]) -> None:
    """A stack deployed without sm-dist (console, aws cloudformation deploy) can run the default image too."""
    from sm_dist.catalog.images import training_image
    from sm_dist.planning.constraints import check_image_pull

    defaults = {k: str(v.get("Default", "")) for k, v in tpl["Parameters"].items()}
    allowed = tuple(_render(_pull_statement(tpl)["Resource"], {**defaults, "AWS::Region": "us-east-1",
                                                                 "AWS::Partition": "aws"}, tpl))
    assert check_image_pull(training_image(None, "us-east-1", gpu=True).uri, allowed, "s") == []


def test_one_to_three_repositories_render_and_the_table_fits(tpl: dict[str, Any]) -> None:
    from sm_dist.catalog.images import repositories

    params = {**_params_for("us-east-1", tpl)}
    for given in ("a", "a,b", "a,b,c"):
        rendered = _render(_pull_statement(tpl)["Resource"], {**params, "ImageRepositories": given}, tpl)
        assert [r.rsplit("/", 1)[1] for r in rendered] == given.split(",")
    assert len(repositories()) <= 3  # the template's slots


def test_the_output_plan_reads_is_the_policys_resource(tpl: dict[str, Any]) -> None:
    output = tpl["Outputs"]["ImageRepositoryArns"]["Value"]
    assert output == {"Fn::Join": [",", _pull_statement(tpl)["Resource"]]}
