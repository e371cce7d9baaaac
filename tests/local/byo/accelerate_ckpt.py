"""An Accelerate training loop as its docs write one: `Accelerator` with a `ProjectConfiguration`
(automatic_checkpoint_naming: `save_state()` writes `<project_dir>/checkpoints/checkpoint_N`, its
Nth save from 0), `prepare`, `accelerator.backward`, a tqdm bar over the steps on each host's main
process, `load_state()` of the newest save at start and `skip_first_batches` to resume mid-epoch,
`save_model` into SM_MODEL_DIR at the end. Nothing in it knows about sm_dist."""

import argparse
import os
import time

import torch
from accelerate import Accelerator
from accelerate.utils import ProjectConfiguration, set_seed
from torch.utils.data import DataLoader, TensorDataset
from tqdm.auto import tqdm


def main(args):
    config = ProjectConfiguration(project_dir=args.checkpoint_dir, automatic_checkpoint_naming=True)
    accelerator = Accelerator(cpu=args.cpu, project_config=config)
    set_seed(0)
    data = TensorDataset(torch.randn(args.steps * 8 * accelerator.num_processes, 20),
                         torch.randint(0, 4, (args.steps * 8 * accelerator.num_processes,)))
    model = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    loader = DataLoader(data, batch_size=8, shuffle=False)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)

    start = 0
    saves = os.path.join(args.checkpoint_dir, "checkpoints")
    if os.path.isdir(saves) and os.listdir(saves):
        accelerator.load_state()  # the newest checkpoint_N
        done = max(int(name.rsplit("_", 1)[1]) for name in os.listdir(saves)) + 1
        accelerator.project_configuration.iteration = done  # the next save's number
        start = done * args.save_every
        accelerator.print(f"Resumed from save {done - 1} at step {start}")
    progress = tqdm(range(args.steps), initial=start, disable=not accelerator.is_local_main_process)
    model.train()
    for step, (inputs, targets) in enumerate(accelerator.skip_first_batches(loader, start), start=start):
        loss = torch.nn.functional.cross_entropy(model(inputs), targets)
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        progress.update(1)
        if (step + 1) % args.save_every == 0:
            accelerator.save_state()
        time.sleep(args.step_sleep)
    accelerator.wait_for_everyone()
    accelerator.save_model(model, args.model_dir)
    accelerator.end_training()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--cpu", action="store_true", help="If passed, will train on the CPU.")  # as its examples
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--save-every", type=int, default=3)
    parser.add_argument("--step-sleep", type=float, default=0.2)
    parser.add_argument("--checkpoint-dir", default="/opt/ml/checkpoints")  # what SageMaker syncs to S3
    parser.add_argument("--model-dir", default=os.environ.get("SM_MODEL_DIR", "/opt/ml/model"))
    main(parser.parse_args())
