"""Running `hf-slm` on one process or on several (torchrun, gloo, CPU), and reading a run's logged losses."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path


TIMEOUT_SECONDS = 120


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def one_thread_environment():
    # One thread per process: the 2 processes share the machine's cores, and the 1-process run must compute
    # with the same kernels (thread counts can change the order of float sums). On the CPU, with gloo, on every
    # machine: where one GPU is present, torchrun's second process would ask for a second device (seen on an H200,
    # where the 1-versus-2-process comparison failed), and the 1-process run would compute on another device.
    return {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
            "CUDA_VISIBLE_DEVICES": ""}


def run_cli(args, processes=1):
    """`hf-slm ARGS` on `processes` processes (torchrun for more than one); the CompletedProcess, checked."""
    if processes == 1:
        command = [sys.executable, "-m", "hf_slm.cli", *args]
    else:
        command = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={processes}",
                   "--master-addr=127.0.0.1", f"--master-port={free_port()}", "-m", "hf_slm.cli", *args]
    result = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_SECONDS, env=one_thread_environment())
    assert result.returncode == 0, f"{' '.join(command)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"
    return result


def logged_losses(run_dir, step):
    state = json.loads((Path(run_dir) / f"checkpoint-{step}" / "trainer_state.json").read_text())
    return {entry["step"]: entry["loss"] for entry in state["log_history"] if "loss" in entry}


def train_args(trees, output, batch_size, max_steps=4, save_steps=4):
    # Dropout off: the processes draw other random masks than the single process would.
    model = ["hidden_size=32", "intermediate_size=64", "num_hidden_layers=1", "num_attention_heads=2",
             "max_sequence_length=512", "embedding_dropout=0", "core_dropout=0", "final_dropout=0"]
    return ["train", "--preset", "tg-ptb", "--train", str(trees), "--output", str(output), "--vocab-size", "200",
            *[part for setting in model for part in ("--set", setting)], "--max-steps", str(max_steps),
            "--batch-size", str(batch_size), "--logging-steps", "1", "--save-steps", str(save_steps),
            "--learning-rate", "1e-3", "--warmup-steps", "1"]
