"""A plain DDP training script in the style of pytorch/examples' ddp-tutorial-series
(multinode.py): argparse, torchrun's environment, a rank-0 `torch.save` snapshot it resumes
from, the final weights in SM_MODEL_DIR, a tqdm bar over the epochs on rank 0. Nothing in it
knows about sm_dist."""

import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler
from tqdm import tqdm


class Trainer:
    def __init__(self, model, train_data, optimizer, save_every, snapshot_path):
        self.local_rank = int(os.environ["LOCAL_RANK"])
        self.global_rank = int(os.environ["RANK"])
        self.model = model
        self.train_data = train_data
        self.optimizer = optimizer
        self.save_every = save_every
        self.epochs_run = 0
        self.snapshot_path = snapshot_path
        self.epoch_sleep = 0.0
        if os.path.exists(snapshot_path):
            print("Loading snapshot")
            self._load_snapshot(snapshot_path)
        self.model = DDP(self.model)

    def _load_snapshot(self, snapshot_path):
        snapshot = torch.load(snapshot_path, weights_only=True)
        self.model.load_state_dict(snapshot["MODEL_STATE"])
        self.optimizer.load_state_dict(snapshot["OPTIMIZER_STATE"])
        self.epochs_run = snapshot["EPOCHS_RUN"]
        print(f"Resuming training from snapshot at Epoch {self.epochs_run}")

    def _run_epoch(self, epoch):
        self.train_data.sampler.set_epoch(epoch)
        for source, targets in self.train_data:
            self.optimizer.zero_grad()
            loss = F.cross_entropy(self.model(source), targets)
            loss.backward()
            self.optimizer.step()
        time.sleep(self.epoch_sleep)
        print(f"[RANK{self.global_rank}] Epoch {epoch} | Steps: {len(self.train_data)}")

    def _save_snapshot(self, epoch):
        snapshot = {"MODEL_STATE": self.model.module.state_dict(),
                    "OPTIMIZER_STATE": self.optimizer.state_dict(), "EPOCHS_RUN": epoch + 1}
        torch.save(snapshot, self.snapshot_path + ".tmp")
        os.replace(self.snapshot_path + ".tmp", self.snapshot_path)
        print(f"Epoch {epoch} | Training snapshot saved at {self.snapshot_path}")

    def train(self, max_epochs):
        epochs = range(self.epochs_run, max_epochs)
        for epoch in tqdm(epochs, initial=self.epochs_run, total=max_epochs, disable=self.global_rank != 0):
            self._run_epoch(epoch)
            if self.global_rank == 0 and epoch % self.save_every == 0:
                self._save_snapshot(epoch)


def main(args):
    dist.init_process_group(backend="gloo")
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(256, 20), torch.randint(0, 4, (256,)))
    model = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    loader = DataLoader(data, batch_size=args.batch_size, shuffle=False, sampler=DistributedSampler(data))
    trainer = Trainer(model, loader, optimizer, args.save_every, os.path.join(args.checkpoint_dir, "snapshot.pt"))
    trainer.epoch_sleep = args.epoch_sleep
    trainer.train(args.total_epochs)
    if int(os.environ["RANK"]) == 0:
        torch.save(trainer.model.module.state_dict(), os.path.join(args.model_dir, "model.pt"))
    dist.destroy_process_group()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="simple distributed training job")
    parser.add_argument("--total-epochs", type=int, default=6)
    parser.add_argument("--save-every", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--epoch-sleep", type=float, default=0.0)
    parser.add_argument("--model-dir", default=os.environ.get("SM_MODEL_DIR", "/opt/ml/model"))
    parser.add_argument("--checkpoint-dir", default="/opt/ml/checkpoints")  # what SageMaker syncs to S3
    main(parser.parse_args())
