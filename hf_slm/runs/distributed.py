"""Running hf-slm under `torchrun --nproc_per_node=N` or `accelerate launch` (issue 18).

Training: transformers.Trainer does data parallelism; what hf-slm adds is that the work done once per run (checking
the output folder, training the tokenizer, writing the model, cards and training_setup.json) is done by the main
process only, and that the other processes wait for it and read what it wrote (hf_slm/training/train.py).

Evaluation: the items are scored in fixed chunks (hf_slm.runs.journal.map_in_chunks); with N processes, round k
gives chunk k * N + r to process r, every process searches on its own device, and the values of a round are
gathered on every process, so that each one computes the same metrics as a single-process run and only the main
process writes the journal and the results (hf_slm/evaluation/results.py).

The process group is accelerate's `PartialState` (the one Trainer builds too), created on first use: on a machine
without CUDA it is a CPU (gloo) group. Without a launcher every helper here is the single-process identity.
"""

import atexit
import os
from contextlib import contextmanager

import torch


def launched_processes():
    """How many processes the launcher started (torchrun and accelerate launch set WORLD_SIZE); 1 without one."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def process_state():
    """accelerate's PartialState, which initializes the process group under a launcher. A CPU group (gloo) where
    there is no CUDA: the choice TrainingArguments(use_cpu=True) makes, so that Trainer finds the same state."""
    from accelerate import PartialState

    state = PartialState(cpu=not torch.cuda.is_available())
    global _closing_registered
    if not _closing_registered and torch.distributed.is_initialized():
        # A process that exits with its group still open can abort in gloo's teardown ("terminate called without an
        # active exception"): close it first.
        atexit.register(_close_process_group)
        _closing_registered = True
    return state


_closing_registered = False


def _close_process_group():
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def world_size():
    return process_state().num_processes if launched_processes() > 1 else 1


def is_distributed():
    return world_size() > 1


def rank():
    return process_state().process_index if launched_processes() > 1 else 0


def is_main_process():
    return rank() == 0


def device():
    """The device this process computes on: its own GPU under a launcher (cuda:LOCAL_RANK), else the CPU."""
    chosen = process_state().device if launched_processes() > 1 else torch.device("cpu")
    # accelerate names the CPU "cpu:0", which compares unequal to torch.device("cpu"), and a model moved there
    # searched with other float sums (the DTG beam's log-probs differed in the 8th digit): the CPU is "cpu".
    return torch.device("cpu") if chosen.type == "cpu" else chosen


def barrier():
    if is_distributed():
        torch.distributed.barrier()


def broadcast_from_main(value):
    """The main process's `value` on every process (any picklable object)."""
    if not is_distributed():
        return value
    box = [value]
    torch.distributed.broadcast_object_list(box, src=0)
    return box[0]


def gather_objects(value):
    """[value of process 0, value of process 1, ...] on every process (any picklable object)."""
    if not is_distributed():
        return [value]
    values = [None] * world_size()
    torch.distributed.all_gather_object(values, value)
    return values


class AnotherProcessFailed(RuntimeError):
    """Raised on every process but one when that one failed (the main process doing work for all, or any process
    computing its share), so that no process waits forever for it."""


def on_main_process(compute, what):
    """`compute()` run by the main process only, its result given to every process.

    When it raises on the main process, the error is raised there and every other process raises
    AnotherProcessFailed naming `what` and the error, instead of waiting forever for a result that never comes.
    """
    if not is_distributed():
        return compute()
    result, error = None, None
    if is_main_process():
        try:
            result = compute()
        except Exception as caught:  # every kind: the others must hear of it before this process stops
            error = caught
    outcome = broadcast_from_main((result, None if error is None else f"{type(error).__name__}: {error}"))
    if error is not None:
        raise error
    if outcome[1] is not None:
        raise AnotherProcessFailed(f"the main process failed {what}: {outcome[1]}")
    return outcome[0]


def gathered(compute, what):
    """[the value of `compute()` on process 0, on process 1, ...] on every process; `compute` None: this process
    has nothing to compute (its entry is None).

    When `compute()` raises on one process, every process raises: that one its own error, the others an
    AnotherProcessFailed naming the process, `what` and the error, instead of waiting forever.
    """
    value, error = None, None
    try:
        value = compute() if compute is not None else None
    except Exception as caught:  # every kind: the others must hear of it before this process stops
        error = caught
    if not is_distributed():
        if error is not None:
            raise error
        return [value]
    outcomes = gather_objects((value, None if error is None else f"{type(error).__name__}: {error}"))
    if error is not None:
        raise error
    for index, (_, failure) in enumerate(outcomes):
        if failure is not None:
            raise AnotherProcessFailed(f"process {index} failed {what}: {failure}")
    return [outcome[0] for outcome in outcomes]


@contextmanager
def main_process_context(context, what):
    """Enter `context` (a context manager) on the main process only, e.g. the output folder's lock, yielding what
    it yields there and None on the other processes, which enter nothing. An error entering it on the main
    process stops every process (on_main_process)."""
    if not is_distributed():
        with context as value:
            yield value
        return
    entered, value = False, None
    if is_main_process():
        try:
            value = context.__enter__()
            entered = True
        except Exception as error:
            on_main_process(lambda error=error: _raise(error), what)
    on_main_process(lambda: None, what)  # the others wait here until the main process holds the context
    try:
        yield value
    except BaseException as error:
        if entered and context.__exit__(type(error), error, error.__traceback__):
            return
        raise
    else:
        if entered:
            context.__exit__(None, None, None)
        # Every process leaves together: one that went on to exit while the main process still wrote its files
        # could abort in gloo's teardown ("terminate called without an active exception", seen under CI load).
        barrier()


def _raise(error):
    raise error


__all__ = ["AnotherProcessFailed", "barrier", "broadcast_from_main", "device", "gather_objects", "gathered",
           "is_distributed", "is_main_process", "launched_processes", "main_process_context", "on_main_process",
           "process_state", "rank", "world_size"]
