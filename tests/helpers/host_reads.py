"""Watching the reads back from the device: what test_training_step.py and test_search_host_reads.py count.

A read back (item, int, bool, float, index; tolist, numpy, cpu; an operator whose output size is data: nonzero,
boolean indexing, masked_select, unique, repeat_interleave) makes the host wait for the device; so does a tensor
made from host data (torch.tensor, as_tensor, from_numpy, then copied over) while the device has work queued. A
HostReads mode records each with its reader: the innermost function of this repository's code on the stack.
`watch_host_reads` adds the reads that bypass the dispatcher (the conftest fixture `host_reads` gives one mode so
watched)."""

import traceback
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

REPOSITORY = Path(__file__).resolve().parents[2]
# Operators whose output size depends on the values: they wait for the device.
DATA_SIZED = {"nonzero", "masked_select", "unique", "_unique", "_unique2", "unique_dim", "unique_consecutive",
              "repeat_interleave", "_local_scalar_dense"}  # (the last: item, int, bool, float, index)


def reader():
    """The innermost frame of this repository's code on the stack, as "file.py:function": not the tests' (tests/ and
    its helpers), and not a library's installed under the repository (the README's set-up puts a virtual environment
    in `.venv/` there)."""
    for frame in reversed(traceback.extract_stack()[:-2]):
        path = Path(frame.filename)
        if REPOSITORY not in path.parents:
            continue
        parts = path.relative_to(REPOSITORY).parts
        if parts[0] != "tests" and not any(part.startswith(".") or part == "site-packages" for part in parts):
            return f"{path.name}:{frame.name}"
    return "(outside the repository)"


def is_data_sized(func, args):
    """Whether the operator `func` on `args` reads values back: a DATA_SIZED one, or indexing by a boolean mask."""
    name = func.overloadpacket.__name__
    boolean_index = name in ("index", "index_put", "index_put_") and any(
        torch.is_tensor(index) and index.dtype == torch.bool for index in (args[1] or ()))
    return name in DATA_SIZED or boolean_index


class HostReads(TorchDispatchMode):
    """Records every operator that reads values back to the host (a device sync off the CPU), with its reader."""

    def __init__(self):
        super().__init__()
        self.reads, self.active = [], False

    def __enter__(self):
        self.active = True
        return super().__enter__()

    def __exit__(self, *exception):
        self.active = False
        return super().__exit__(*exception)

    def note(self, how, tensor=None):
        """A read (`how`) of `tensor` (None: a tensor made from host data)."""
        if self.active:
            self.reads.append((reader(), how))

    def made(self, tensor):
        """`tensor` was made from host data (after `note`); a mode that follows tensors may mark it."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if is_data_sized(func, args):
            self.note(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


def watch_host_reads(monkeypatch, mode):
    """Make `mode` (a HostReads) also see the reads that bypass the dispatcher (Tensor.tolist, numpy; cpu, a no-op on
    the CPU) and the tensors made from host data (a copy from the host that waits on the device). Returns `mode`."""
    for name in ("tolist", "numpy", "cpu"):
        original = getattr(torch.Tensor, name)

        def watched(self, *args, _original=original, _name=name, **kwargs):
            mode.note(f"Tensor.{_name}", self)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, watched)
    for name in ("tensor", "as_tensor", "from_numpy"):
        original = getattr(torch, name)

        def made(*args, _original=original, _name=name, **kwargs):
            mode.note(f"torch.{_name}")
            tensor = _original(*args, **kwargs)
            mode.made(tensor)
            return tensor

        monkeypatch.setattr(torch, name, made)
    return mode
