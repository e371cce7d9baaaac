"""A PyTorch Lightning script as the Lightning docs write a multi-node job: a LightningModule, a
Trainer with num_nodes and strategy="ddp", a ModelCheckpoint in /opt/ml/checkpoints with
save_last, `trainer.fit(..., ckpt_path="last")` to resume, the weights in SM_MODEL_DIR. Runs on
CPU with a tiny model on random data. Nothing in it knows about sm_dist."""

import argparse
import os
import time

import lightning as L
import torch
import torch.nn.functional as F
from lightning.pytorch.callbacks import ModelCheckpoint, TQDMProgressBar
from torch.utils.data import DataLoader, TensorDataset


class Classifier(L.LightningModule):
    def __init__(self, epoch_sleep=0.0):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
        self.epoch_sleep = epoch_sleep

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def on_train_epoch_end(self):
        time.sleep(self.epoch_sleep)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--epoch-sleep", type=float, default=0.0)
    parser.add_argument("--num-nodes", type=int, default=int(os.environ.get("SM_HOST_COUNT", 1)))
    args = parser.parse_args()

    L.seed_everything(0)
    generator = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(256, 20, generator=generator), torch.randint(0, 4, (256,), generator=generator))
    model = Classifier(args.epoch_sleep)
    checkpoint = ModelCheckpoint(dirpath="/opt/ml/checkpoints", save_last=True, every_n_epochs=1)
    trainer = L.Trainer(
        accelerator="cpu", devices=1, num_nodes=args.num_nodes, strategy="ddp", max_epochs=args.epochs,
        callbacks=[checkpoint, TQDMProgressBar()], logger=False, deterministic=True,
    )
    trainer.fit(model, DataLoader(data, batch_size=32), ckpt_path="last")
    if trainer.is_global_zero:
        torch.save(model.state_dict(), os.path.join(os.environ.get("SM_MODEL_DIR", "/opt/ml/model"), "model.pt"))


if __name__ == "__main__":
    main()
