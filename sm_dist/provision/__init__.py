"""`sm-dist infra`: the CloudFormation stack holding the execution role and checkpoint bucket.

Modules, one idea each: `template` (find and parse the shipped templates), `params` (check a
stack name and `--param K=V` values against the template before any AWS call), `stack`
(deploy / show / delete with boto3 CloudFormation), `events` (follow a stack operation and
explain failures), `config` (the local file deploy writes), `outputs` (`resolve()`: what `fit`
uses). Nothing here is imported eagerly; boto3 and PyYAML are imported inside functions.
"""
