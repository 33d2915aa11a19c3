"""Training with Transformer-XL segment recurrence (paper 000, section 2.2; issue 16) on transformers.Trainer.

The ordering is Transformer-XL's: the training sequences (documents, or sentences) are split into B contiguous
streams, one per batch row; step i gives every row the next segment of its stream, so consecutive batches
continue the rows and the memory a row built in step i is the one it reads in step i + 1. A row whose stream has
ended reads an idle segment (padding, no labels) until the epoch ends; a new sequence starts from an empty memory
(segments.SegmentedSequence.memory_reset). Every epoch reads the streams again from their start.

Trainer expresses this with two small changes, in `SegmentTrainer`: the training dataloader reads the steps in
order (`DocumentStreams`: item i is step i's whole batch; no shuffling, no length grouping: either would break the
streams), and `compute_loss` carries the memory from one call to the next (modeling/segment_recurrence.py). The
memory is part of the training state: every checkpoint saves it (`segment_memory.safetensors`) and `--resume`
restores it, so a resumed run reads the same memory, and gives the same losses, as an uninterrupted one (Trainer
restores the weights, the optimizer, the random states and skips the batches already read).

Under N processes (torchrun / accelerate launch) the run takes the steps of one process with N times the batch:
the sequences are split into B x N streams, process r reading streams r B .. r B + B - 1, and every process takes
the steps of the longest stream. `compute_loss` calls `segment_forward` on the unwrapped model (the memory is
not an input DistributedDataParallel's forward knows), so DDP's own gradient averaging never runs; instead each
process's loss is weighted by its share of the batch's predicted actions (x N) and `training_step` averages the
gradients itself, one all-reduce of all of them, before Trainer clips them and steps. Each process keeps its
streams' memory, saved per process in every checkpoint (`memory_file`).
"""

import json
from pathlib import Path

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from torch.utils.data import DataLoader, Dataset, SequentialSampler
from tqdm.auto import tqdm
from transformers import Trainer

from ..checkpoints.whole import WholeCheckpoints, checkpoint_to_resume
from ..families import doubled_id_ranges
from ..modeling.segment_recurrence import (
    SegmentBatch,
    check_segment_model,
    collate_segments,
    empty_memory,
    segment_forward,
)
from ..modeling.segments import check_segment_options, padding_segment, segment_sequence

MEMORY_FILE = "segment_memory.safetensors"


def memory_file(process_index=0):
    """The file in a checkpoint that holds a process's memory (the main process's: MEMORY_FILE)."""
    return MEMORY_FILE if process_index == 0 else f"segment_memory.process{process_index}.safetensors"


def split_into_streams(lengths, streams):
    """[streams] lists of sequence indices: contiguous runs of the sequences, in order (Transformer-XL cuts its
    corpus into B contiguous parts). Part k ends at the sequence boundary nearest to k / streams of the segments
    (`lengths`: segments per sequence), so each part holds its share of the segments give or take one sequence."""
    if streams < 1:
        raise ValueError(f"streams {streams!r}: expected at least one (the batch size)")
    boundaries = np.cumsum([0] + list(lengths))
    parts, start = [], 0
    for part in range(1, streams + 1):
        target = boundaries[-1] * part / streams
        stop = int(np.searchsorted(boundaries, target))
        if stop > 0 and (stop == len(boundaries) or target - boundaries[stop - 1] <= boundaries[stop] - target):
            stop -= 1  # the boundary before the share is the nearer one
        stop = len(lengths) if part == streams else max(start, stop)
        parts.append(list(range(start, stop)))
        start = stop
    return parts


class DocumentStreams(Dataset):
    """Step i of an epoch: a dict of SegmentBatch tensors, row b the i-th segment of stream b (module docstring).

    `sequences`: lists of action ids (documents under a document-level grammar, or sentences). A sequence is cut
    into segments when a stream reaches it (its per-segment masks are O(n L (M + L)): a corpus cut in advance
    would not fit in memory), and kept while its stream reads it.
    """

    def __init__(self, grammar, sequences, streams, segment_length, memory_length=None, memory_update=None,
                 disable_progress=False, process_index=0, processes=1):
        self.grammar = grammar
        self.sequences = sequences
        L, M, rule = check_segment_options(grammar, segment_length, memory_length, memory_update)
        self.segment_length, self.memory_length, self.memory_update = L, M, rule
        if not len(sequences):
            raise ValueError("no training sequences to cut into segments")
        # Segments per sequence, from its expanded length (ids that take two positions counted twice).
        doubled = doubled_id_ranges(grammar.name, grammar.layout.to_dict())
        counts = []
        for ids in tqdm(sequences, desc="counting segments", unit="sequence", disable=disable_progress):
            ids = np.asarray(ids)
            expanded = len(ids) + sum(int(((ids >= low) & (ids < high)).sum()) for low, high in doubled)
            counts.append(-(-expanded // L))
        self.segment_counts = counts
        every = [[(i, tau) for i in part for tau in range(counts[i])]
                 for part in split_into_streams(counts, streams * processes)]
        self.streams = every[process_index * streams: (process_index + 1) * streams]  # this process's rows
        self.steps = max(len(stream) for stream in every)  # every process takes the same steps
        self._segmented = {}  # sequence index -> SegmentedSequence, while a stream reads it
        self._padding = None

    def __len__(self):
        return self.steps

    def segmented(self, index):
        """Sequence `index` cut into segments (cached while a stream reads it)."""
        if index not in self._segmented:
            try:
                segmented = segment_sequence(self.grammar, list(self.sequences[index]), self.segment_length,
                                             self.memory_length, self.memory_update)
            except ValueError as error:
                raise ValueError(f"training sequence {index}: {error}") from error
            if segmented.num_segments != self.segment_counts[index]:
                raise AssertionError(f"sequence {index}: {segmented.num_segments} segments, counted "
                                     f"{self.segment_counts[index]}")
            self._segmented[index] = segmented
        return self._segmented[index]

    def padding(self):
        """The segment a row reads once its stream has ended (the fields of this grammar's segments)."""
        if self._padding is None:
            like = segment_sequence(self.grammar, list(self.sequences[0]), self.segment_length, self.memory_length,
                                    self.memory_update)
            self._padding = padding_segment(self.segment_length, self.memory_length,
                                            int(self.grammar.layout.pad_token_id), like.coordinates is not None,
                                            like.added_token_ids is not None)
        return self._padding

    def __getitem__(self, step):
        active = {b: (self.segmented(stream[step][0]), stream[step][1]) for b, stream in enumerate(self.streams)
                  if step < len(stream)}
        # rows whose stream has ended read a padding segment (under several processes, maybe all of them)
        rows = [active.get(b, (self.padding(), 0)) for b in range(len(self.streams))]
        # Keep only what the streams still read: the sequences at this step (the next step reads the same or the
        # next ones).
        current = {stream[step][0] for stream in self.streams if step < len(stream)}
        for index in [i for i in self._segmented if i not in current]:
            del self._segmented[index]
        batch = collate_segments(rows)
        return {name: value for name, value in vars(batch).items() if value is not None}


class SegmentTrainer(WholeCheckpoints, Trainer):
    """Trainer over DocumentStreams carrying the memory between steps (module docstring)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        check_segment_model(self.model)
        self.segment_memory = None

    def save_extra_files(self, folder):
        """Each process's memory, into the checkpoint being written (before it is renamed whole)."""
        if self.segment_memory is None:
            return
        tensors = {f"layer_{k}": layer.detach().contiguous().cpu() for k, layer in enumerate(self.segment_memory)}
        save_file(tensors, str(Path(folder) / memory_file(self.args.process_index)),
                  metadata={"global_step": json.dumps(self.state.global_step),
                            "processes": json.dumps(self.args.world_size)})

    def get_train_dataloader(self):
        # Each item is already a whole batch, read in order (batches of one item, unwrapped: resuming skips batches
        # through the loader's batch sampler, which batch_size=None would not have).
        return DataLoader(self.train_dataset, batch_size=1, sampler=SequentialSampler(self.train_dataset),
                          collate_fn=_only_item, num_workers=0)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        batch = SegmentBatch(**inputs)
        model = self.accelerator.unwrap_model(model)
        if self.segment_memory is None:
            self.segment_memory = empty_memory(model, len(batch.input_ids), self.train_dataset.memory_length)
        # The unwrapped model skips the prepared forward, where accelerate applies --bf16 / --fp16's autocast.
        with self.accelerator.autocast():
            output = segment_forward(model, batch, self.segment_memory)
        self.segment_memory = output.memory
        loss = output.loss
        if self.args.world_size > 1 and model.training:  # this process's share of the batch's actions (x N)
            mine = torch.tensor(output.num_predicted, device=loss.device)
            loss = loss * process_share(mine, self.accelerator.gather, self.args.world_size).to(loss.dtype)
        return (loss, output) if return_outputs else loss

    def training_step(self, model, inputs, num_items_in_batch=None):
        loss = super().training_step(model, inputs, num_items_in_batch)
        if self.args.world_size > 1:  # what DistributedDataParallel's forward would have set up (module docstring)
            average_gradients(self.accelerator.unwrap_model(model))
        return loss

    def restore_memory(self, checkpoint):
        """Read the memory this process saved in a checkpoint; ValueError where it saved none (a run without
        segments) or was saved by another number of processes."""
        name = memory_file(self.args.process_index)
        path = Path(checkpoint) / name
        if not path.is_file():
            raise ValueError(f"checkpoint {str(checkpoint)!r} has no {name}: it was not written by a run with "
                             f"segment recurrence on {self.args.world_size} process(es), so this process's memory "
                             "cannot be restored")
        with safe_open(str(path), "pt") as handle:
            saved_by = json.loads((handle.metadata() or {}).get("processes", "1"))
        if saved_by != self.args.world_size:
            raise ValueError(f"checkpoint {str(checkpoint)!r} holds the memory of {saved_by} process(es)' streams; "
                             f"resume it on {saved_by}, not {self.args.world_size}")
        tensors = load_file(str(path))
        layers = len([name for name in tensors if name.startswith("layer_")])
        self.segment_memory = tuple(tensors[f"layer_{k}"] for k in range(layers))

    def train(self, resume_from_checkpoint=None, **kwargs):
        if resume_from_checkpoint:
            checkpoint = (checkpoint_to_resume(self.args.output_dir) if resume_from_checkpoint is True
                          else resume_from_checkpoint)
            self.restore_memory(checkpoint)
            resume_from_checkpoint = checkpoint
        return super().train(resume_from_checkpoint=resume_from_checkpoint, **kwargs)


def process_share(mine, gather, processes):
    """This process's share of a count summed over all processes, times their number: the weight of its mean loss
    under which the average of the processes' gradients is that of the whole batch's mean. `gather` collects a
    1-element tensor from every process."""
    return mine * processes / gather(mine.reshape(1)).sum().clamp(min=1)


def average_gradients(model):
    """Average the gradients of `model`'s trainable parameters over the processes: one all-reduce of all of them
    (a parameter without a gradient here counts as zeros, so that every process sends the same tensor)."""
    parameters = [p for p in model.parameters() if p.requires_grad]
    flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).flatten() for p in parameters])
    torch.distributed.all_reduce(flat)
    flat /= torch.distributed.get_world_size()
    offset = 0
    for parameter in parameters:
        parameter.grad = flat[offset: offset + parameter.numel()].view_as(parameter)
        offset += parameter.numel()


def _only_item(items):
    return items[0]
