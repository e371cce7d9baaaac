"""Local mode: emulate a multi-instance SageMaker job on this machine (CPU, gloo, moto S3)."""
