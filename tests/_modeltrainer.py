"""SageMaker SDK v3's own container environment, as the reference local mode and PID 1 are held to.

`modeltrainer_env` runs ModelTrainer's `container_drivers/scripts/environment.py` (the code its
`sm_train.sh` runs before a script) on a folder laid out as /opt/ml and returns the variables it
exports, read as bash's `source` reads its `sm_training.env`.
"""

from __future__ import annotations

import importlib
import json
import shlex
from pathlib import Path

import pytest

#: Names only ModelTrainer sets: its driver folder (sm_dist's PID 1 is the driver).
ONLY_MODELTRAINER = {"SM_DISTRIBUTED_DRIVER_DIR"}
#: Names only sm_dist sets: CheckpointConfig.LocalPath, wherever /opt/ml is.
ONLY_SM_DIST = {"SM_CHECKPOINT_DIR"}


def modeltrainer_env(root: Path, out: Path, monkeypatch: pytest.MonkeyPatch, *, gpus: int = 8, cpus: int = 96,
                     job_name: str = "job-7") -> dict[str, str]:
    """What ModelTrainer's environment.py exports for the input/config files at `root`."""
    environment = importlib.import_module("sagemaker.train.container_drivers.scripts.environment")
    # what ModelTrainer writes into its drivers channel for SourceCode(entry_script=...) and Torchrun()
    monkeypatch.setattr(environment, "read_source_code_json", lambda: {"entry_script": "train.py"})
    monkeypatch.setattr(environment, "read_distributed_json", lambda: {"process_count_per_node": gpus, "smp": None})
    monkeypatch.setattr(environment, "num_gpus", lambda: gpus)
    monkeypatch.setattr(environment, "num_cpus", lambda: cpus)
    # the GPU instance described above has no Neuron cores (asking would run `neuron-ls`, a process)
    monkeypatch.setattr(environment, "num_neurons", lambda: 0)
    monkeypatch.setenv("TRAINING_JOB_NAME", job_name)
    config = root / "input" / "config"
    environment.set_env(resource_config=json.loads((config / "resourceconfig.json").read_text()),
                        input_data_config=json.loads((config / "inputdataconfig.json").read_text()),
                        hyperparameters_config=json.loads((config / "hyperparameters.json").read_text()),
                        output_file=str(out))
    exported = {}
    for line in out.read_text().splitlines():
        key, _, value = line.removeprefix("export ").partition("=")
        exported[key] = shlex.split(value)[0] if value != "''" else ""
    return exported
