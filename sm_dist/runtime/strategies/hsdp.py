"""hsdp: shard inside an instance, replicate across instances (FSDP2 on a 2-D mesh).

The mesh is (num_nodes, local_world_size): parameters are sharded over the GPUs of one
instance (fast NVLink all-gathers) and gradients all-reduced across instances.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

from sm_dist.errors import RuntimeEnvError
from sm_dist.runtime.strategies.fsdp import FSDPStrategy

if TYPE_CHECKING:
    from sm_dist.runtime.protocols import StrategyContext


class HSDPStrategy(FSDPStrategy):
    """fully_shard on mesh ("replicate", "shard") = (num_nodes, local_world_size)."""

    name = "hsdp"

    def mesh(self, ctx: StrategyContext) -> DeviceMesh:
        nodes, per_node = ctx.env.num_nodes, ctx.env.local_world_size
        if nodes * per_node != ctx.world_size:
            raise RuntimeEnvError(
                f"hsdp needs the same number of processes on every instance: {nodes} nodes x "
                f"{per_node} per node != world size {ctx.world_size}"
            )
        return init_device_mesh(ctx.device.type, (nodes, per_node), mesh_dim_names=("replicate", "shard"))
