"""The contracts between launch, local mode, the container and the runtime, written once.

Standard library only (importable without torch or boto3): `container` is the SageMaker
container layout (paths under /opt/ml, their local-mode remapping, resourceconfig.json, the
directory variables), `checkpoint` the checkpoint layout, manifest and settings. Every part of
sm_dist reads these definitions instead of keeping its own copy (docs/ARCHITECTURE.md).
"""
