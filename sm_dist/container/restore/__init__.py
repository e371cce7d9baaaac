"""A restarted host's checkpoint folder restore, run by `sm_dist.container.worker` as a subprocess.

Beside the container code that calls it, but not part of PID 1's standard-library world: it needs
torch (the rendezvous store the hosts meet on) and boto3 (the checkpoint URI), so the worker runs it
as ``python -m sm_dist.container.restore.folder_restore`` and never imports it. `folder_restore`
makes the folder what the URI holds (`remotes`: the URI, S3 or a folder; `meeting`: the hosts wait
for each other); `peer_restore` the same from the other hosts' folders under network isolation (no S3
in the container).
"""
