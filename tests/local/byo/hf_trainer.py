"""A Hugging Face `Trainer` script as the SageMaker + transformers examples write it: checkpoints
in /opt/ml/checkpoints (what SageMaker syncs to S3), resume from the newest one there, the final
model in SM_MODEL_DIR. A tiny GPT-2 built from a config (no download) on random tokens, CPU.
Nothing in it knows about sm_dist."""

import argparse
import os

import torch
from torch.utils.data import Dataset
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments
from transformers.trainer_utils import get_last_checkpoint


class RandomTokens(Dataset):
    def __init__(self, n, seq_len, vocab, seed=0):
        generator = torch.Generator().manual_seed(seed)
        self.data = torch.randint(0, vocab, (n, seq_len), generator=generator)

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        return {"input_ids": self.data[i], "labels": self.data[i]}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--max_steps", type=int, default=30)
    parser.add_argument("--save_steps", type=int, default=5)
    parser.add_argument("--output_dir", default="/opt/ml/checkpoints")
    parser.add_argument("--model_dir", default=os.environ.get("SM_MODEL_DIR", "/opt/ml/model"))
    parser.add_argument("--save_on_each_node", action="store_true")
    args = parser.parse_args()

    config = GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=512, n_positions=64)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config)
    training_args = TrainingArguments(
        output_dir=args.output_dir, max_steps=args.max_steps, save_steps=args.save_steps, save_total_limit=2,
        per_device_train_batch_size=4, learning_rate=1e-3, logging_steps=1, report_to=[], use_cpu=True,
        seed=0, data_seed=0, dataloader_num_workers=0, save_on_each_node=args.save_on_each_node,
    )
    last = get_last_checkpoint(args.output_dir) if os.path.isdir(args.output_dir) else None
    if last:
        print(f"resuming from {last}")
    trainer = Trainer(model=model, args=training_args, train_dataset=RandomTokens(256, 32, config.vocab_size))
    trainer.train(resume_from_checkpoint=last)
    trainer.save_model(args.model_dir)


if __name__ == "__main__":
    main()
