"""A restarted host's checkpoint folder restore, run by `sm_dist.container.worker` as a subprocess.

Runtime-world code that the container starts: it needs torch (the rendezvous store the hosts meet
on) and boto3 (the checkpoint URI, through the runtime's S3 storage), which PID 1's standard-library
world lacks, so the worker runs it as ``python -m sm_dist.runtime.restore.folder_restore`` and never
imports it. `folder_restore` makes the folder what the URI holds (`remotes`: the URI, S3 or a folder;
`meeting`: the hosts wait for each other); `peer_restore` the same from the other hosts' folders under
network isolation (no S3 in the container).
"""
