"""Training the syntactic LMs of every family with grammars with transformers.Trainer (Family.train's default).

The loop is Trainer's; what this module adds is the glue: a tokenizer trained on the training trees (or a
given one; a new one is of the class the grammar's family trains, Family.default_tokenizer, in the grammar's
linearization; a tokenizer of unlabelled trees gets the trees unlabelled, Family.unlabelled_trees), the model
config from a preset and the tokenizer's id layout (and what else the family's config takes from its tokenizer,
Family.tokenizer_config_fields), datasets of action ids, the data collator, Adam with the paper's schedule
(linear warm-up from the initial to the maximum learning rate, then cosine decay to the final one; paper 000,
Appendix B), an optional learning-rate multiplier for the token embedding (paper 002, section 4: 2.0 for its
presets) and gradient clipping at norm 3 (a preset's `max_grad_norm` otherwise: RNNG's 5).

Training data is either tree files, tokenized here, or one folder made by `hf-slm data prepare`
(hf_slm.data.prepare): its `train` split's input_ids, its `validation` (or `dev`) split for evaluation, and
the tokenizer saved with it. A grammar whose trees tree files do not hold (hf_slm/families/tree_formats.py,
`from_tree_files`: dependency trees) trains on prepared folders only (`hf-slm data prepare --loader conllu
--grammar dtg`), whose tokenizer gives the model its id layout.

The output folder is locked while training writes it (hf_slm.runs.journal.output_lock). A folder that already
holds a trained model (config.json and weights), or the checkpoints of an interrupted run, is refused unless
`overwrite` (which removes the old model's checkpoint-* folders and its eval_results/, which describe the old
model, and trains anew) or `resume`. `resume` continues from the last checkpoint-* with the tokenizer saved in
it (or in the output folder): never a tokenizer trained again, whose ids could differ from the ones the
checkpoint learned.
"""

import datetime
import json
import math
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from datasets import Dataset, DatasetDict, load_from_disk
from transformers import Trainer, TrainerCallback, TrainingArguments
from transformers.trainer_pt_utils import LengthGroupedSampler

from ..option_types import or_default
from ..checkpoints.checks import check_tokenizer_matches, linearization_of
from ..checkpoints.whole import PARTIAL, WholeCheckpoints, checkpoint_to_resume, resume_plan
from ..data.packing import packed_dataset
from ..data.prepare import (
    PREPARE_RECORD,
    TOKENIZER_FOLDER,
    TREE_LOADERS,
    holds_trees,
    load_syntactic_tokenizer,
    trees_for_tokenizer,
)
from ..runs.distributed import (
    barrier,
    is_distributed,
    is_main_process,
    main_process_context,
    on_main_process,
    rank,
    world_size,
)
from ..families import (
    causal_lm_for_config,
    data_preparations,
    doubled_id_ranges,
    families_of_tokenizer,
    family_for_config,
    family_for_grammar,
    grammar_class,
    preset_config,
)
from ..families import preset as preset_of
from ..families.tree_formats import format_of_grammar, format_of_tokenizer, grammars_of_linearization
from ..modeling.configuration_slm import check_segment_position_range, word_boundary_fields
from ..modeling.grammars import grammar_for_config
from ..modeling.segment_recurrence import check_segment_model
from ..modeling.segments import check_segment_options
from ..runs.journal import output_lock
from .segment_training import DocumentStreams, SegmentTrainer, process_share
from ..tokenization.trees import read_trees

def warmup_cosine_schedule(step, warmup_steps, total_steps, initial, peak, final):
    """Learning rate at `step`: linear from `initial` to `peak` over the warm-up, then cosine to `final`."""
    if step < warmup_steps:
        return initial + (peak - initial) * step / max(1, warmup_steps)
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    return final + (peak - final) * 0.5 * (1.0 + math.cos(math.pi * progress))


def make_optimizer(model, learning_rate, warmup_steps, total_steps, initial_learning_rate, final_learning_rate,
                   embedding_learning_rate_multiplier=1.0):
    """Adam (betas 0.9, 0.999, no weight decay) and a LambdaLR following `warmup_cosine_schedule`.

    With `embedding_learning_rate_multiplier` m != 1, the token embedding is a parameter group of its own whose
    learning rate is m times the schedule's at every step (paper 002, section 4: m = 2.0 "to accelerate the
    training of token embeddings"); every other parameter follows the schedule. With m = 1 there is one group,
    as before, so that checkpoints of earlier runs resume into the same optimizer state.
    """
    if embedding_learning_rate_multiplier <= 0:
        raise ValueError(f"embedding_learning_rate_multiplier {embedding_learning_rate_multiplier!r}: expected a "
                         "positive factor (1.0: no separate embedding learning rate)")
    if embedding_learning_rate_multiplier == 1.0:
        groups = model.parameters()
    else:
        # The output layer is tied to the token embedding (one tensor, lm_head.weight is
        # embed_tokens.weight), so the multiplier speeds up the output projection as well: there is no
        # separate output matrix to keep at the base rate. The output bias and everything else keep it.
        embedding = model.get_input_embeddings().weight
        others = [parameter for parameter in model.parameters() if parameter is not embedding]
        groups = [{"params": others},
                  {"params": [embedding], "lr": learning_rate * embedding_learning_rate_multiplier}]
    optimizer = torch.optim.Adam(groups, lr=learning_rate, betas=(0.9, 0.999))

    def factor(step):  # LambdaLR multiplies each group's own base rate by it: the multiplier holds throughout
        lr = warmup_cosine_schedule(step, warmup_steps, total_steps, initial_learning_rate, learning_rate, final_learning_rate)
        return lr / learning_rate

    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def tree_dataset(tokenizer, trees, grammar, max_length, source="trees"):
    """A datasets.Dataset with one column, input_ids (the unexpanded action ids of each tree).

    A tree whose expanded length exceeds `max_length` is an error naming it (nothing is dropped). Labeled trees
    given to a tokenizer of unlabeled trees (paper 003's) are unlabeled first.
    """
    encoding = tokenizer(trees_for_tokenizer(tokenizer, trees))
    encoded = encoding["input_ids"]
    doubled = doubled_id_ranges(grammar, tokenizer.action_layout)
    for index, ids in enumerate(encoded):
        expanded = len(ids) + sum(1 for i in ids for start, stop in doubled if start <= i < stop)
        if expanded > max_length:
            raise ValueError(
                f"{source}: tree {index} expands to {expanded} positions under the {grammar} grammar, more than "
                f"the model's max_sequence_length {max_length}; raise it or remove the tree"
            )
    columns = {"input_ids": encoded}
    for name in tokenizer.action_input_fields:  # per-action fields (Nb-Up: each `)`'s start) travel with the ids
        columns[name] = encoding[name]
    return Dataset.from_dict(columns)


PREPARED_MARKERS = (PREPARE_RECORD, "dataset_dict.json")
EVAL_SPLIT_NAMES = ("validation", "dev")


def is_prepared_dataset(path):
    """Whether `path` is a folder written by `hf-slm data prepare` (or any DatasetDict.save_to_disk)."""
    path = Path(path)
    return path.is_dir() and any((path / marker).is_file() for marker in PREPARED_MARKERS)


def prepared_dataset_dir(paths):
    """The prepared dataset folder when `paths` (--train or --eval) is one, None when they are tree files."""
    prepared = [Path(path) for path in paths if is_prepared_dataset(path)]
    if prepared and len(paths) > 1:
        raise ValueError(
            f"{', '.join(map(str, paths))}: expected either tree files or one prepared dataset folder, not several "
            f"paths with a prepared dataset among them ({prepared[0]})"
        )
    return prepared[0] if prepared else None


def tokenizer_difference(first, second):
    """None when two tokenizers give the same ids, else what differs (class, linearization, the grammar options
    the tokenizer fixes (Family.tokenizer_grammar_options), or vocabulary)."""
    if type(first).__name__ != type(second).__name__:
        return f"{type(first).__name__} vs {type(second).__name__}"
    if first.linearization != second.linearization:
        return f"linearization {first.linearization!r} vs {second.linearization!r}"
    families = families_of_tokenizer(first)  # the same class: the same families
    if families:  # options the tokenizer fixes give the same vocabulary other sequences (a start id, ...)
        options = families[0].tokenizer_grammar_options(first)
        others = families[0].tokenizer_grammar_options(second)
        for name in options:
            if options[name] != others.get(name):
                return f"{name} {options[name]!r} vs {others.get(name)!r}"
    first_vocab, second_vocab = first.get_vocab(), second.get_vocab()
    if first_vocab != second_vocab:
        first_tokens = sorted(first_vocab, key=first_vocab.get)
        second_tokens = sorted(second_vocab, key=second_vocab.get)
        for index, (a, b) in enumerate(zip(first_tokens, second_tokens)):
            if a != b:
                return f"id {index} is {a!r} vs {b!r}"
        return f"{len(first_tokens)} vs {len(second_tokens)} ids"
    return None


def load_prepared_dataset(directory):
    """(DatasetDict, prepare.json record or {}) of a prepared dataset folder; errors name the folder."""
    directory = Path(directory)
    record_path = directory / PREPARE_RECORD
    record = json.loads(record_path.read_text()) if record_path.is_file() else {}
    try:
        dataset = load_from_disk(str(directory))
    except (FileNotFoundError, ValueError) as error:
        raise ValueError(
            f"prepared dataset {str(directory)!r} cannot be loaded with load_from_disk: {error}"
        ) from error
    if not isinstance(dataset, DatasetDict):
        raise ValueError(
            f"prepared dataset {str(directory)!r} holds one Dataset; expected a DatasetDict with a train split"
        )
    loader = record.get("loader")
    # Other loaders' data holds trees when a family's preparation made it (e.g. a dependency grammar's transition
    # sequences of conllu data), or summarization (hf_slm/summarization/preparation.py).
    if loader is not None and not holds_trees(record):
        prepared_by = "".join(f", or on {hook.description} prepared with --grammar ({', '.join(grammars)})"
                              for hook, grammars in data_preparations().items())
        raise ValueError(
            f"prepared dataset {str(directory)!r} was made by the {loader!r} loader, which has no trees; syntactic "
            f"models train on the {' or '.join(TREE_LOADERS)} loaders' input_ids{prepared_by}"
        )
    for split, data in dataset.items():
        if "input_ids" not in data.column_names:
            raise ValueError(f"prepared dataset {str(directory)!r}: split {split!r} has no input_ids column "
                             f"(columns: {data.column_names})")
    return dataset, record


def prepared_tokenizer(directory, tokenizer_dir=None):
    """The tokenizer a prepared dataset was made with; `tokenizer_dir` (--tokenizer) must give the same ids."""
    saved_dir = Path(directory) / TOKENIZER_FOLDER
    saved = load_syntactic_tokenizer(saved_dir) if saved_dir.is_dir() else None
    if tokenizer_dir is None:
        if saved is None:
            raise ValueError(f"prepared dataset {str(directory)!r} has no {TOKENIZER_FOLDER}/ folder: pass --tokenizer "
                             "(the tokenizer its input_ids were made with)")
        return saved
    given = load_syntactic_tokenizer(tokenizer_dir)
    difference = tokenizer_difference(saved, given) if saved is not None else None
    if difference:
        raise ValueError(
            f"tokenizer {str(tokenizer_dir)!r} does not match the one the prepared ids of {str(directory)!r} were made "
            f"with ({saved_dir}): {difference}; leave --tokenizer out or prepare the data again with it"
        )
    return given


def _eval_split(dataset):
    """The name of a DatasetDict's evaluation split (validation, else dev), or None."""
    for name in EVAL_SPLIT_NAMES:
        if name in dataset:
            return name
    return None


def expanded_lengths(data, doubled):
    """[N] int64, the positions each example of a Dataset's input_ids column expands to: its actions, plus one for each
    action in the `doubled` id ranges (Family.doubled_id_ranges: the closing actions a grammar duplicates). Computed in
    numpy over the Arrow column (no Python list per id), so that a BLLIP-size split takes seconds."""
    if getattr(data, "_indices", None) is not None:  # a selection: its own rows, in its order
        data = data.flatten_indices()
    parts = []
    for chunk in data.data.column("input_ids").chunks:
        lengths = np.diff(chunk.offsets.to_numpy())
        expanded = lengths.astype(np.int64)
        if doubled and len(chunk):
            values = chunk.flatten().to_numpy()
            closing = np.zeros(len(values), dtype=bool)
            for low, high in doubled:
                closing |= (values >= low) & (values < high)
            totals = np.concatenate([[0], np.cumsum(closing)])
            ends = np.cumsum(lengths)
            expanded = expanded + totals[ends] - totals[ends - lengths]
        parts.append(expanded)
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def ids_dataset(data, tokenizer, grammar, max_length, source):
    """A Dataset of prepared ids (input_ids, and labels when the data has them), after checking every expanded
    length.

    The lengths are computed in numpy (expanded_lengths), so that a BLLIP-size split is checked in seconds. A sequence
    longer than `max_length` is an error naming it.
    """
    expanded = expanded_lengths(data, doubled_id_ranges(grammar, tokenizer.action_layout))
    too_long = np.flatnonzero(expanded > max_length)
    if too_long.size:
        index = int(too_long[0])
        row = data[index]
        where = f" ({row['file']}, tree {row['index']})" if "file" in row and "index" in row else ""
        where = f" (document {row['document_id']!r})" if "document_id" in row else where
        where = f" (document {row['id']!r})" if "id" in row and "file" not in row else where  # XSum's ids
        raise ValueError(
            f"{source}: example {index}{where} expands to {int(expanded[index])} positions under the "
            f"{grammar} grammar, more than the model's max_sequence_length {max_length}; raise it or remove "
            "the example"
        )
    # Per-action labels (summarization: only the summary is trained) and the grammar's per-action inputs (Nb-Up:
    # each `)`'s start) travel with the ids to the collator.
    kept = ("labels", *grammar_class(grammar).action_inputs)
    return data.select_columns(["input_ids"] + [name for name in kept if name in data.column_names])


@dataclass
class PreparedInputs:
    """What training reads from a prepared dataset folder."""

    directory: Path
    record: dict
    tokenizer: object
    train: Dataset
    eval: Dataset | None = None
    eval_source: str | None = None
    eval_trees: list = field(default_factory=list)  # tree files given as --eval instead

    @property
    def document_level(self):
        return bool(self.record.get("document_level", False))

    def description(self):
        """The training_setup.json entry: where the ids came from."""
        return {
            "path": str(self.directory),
            "loader": self.record.get("loader"),
            "source": self.record.get("path"),
            "options": self.record.get("options"),
            "document_level": self.document_level,
            "train_split": "train",
            "eval": self.eval_source,
        }


def prepared_inputs(directory, setup, grammar, log=print):
    """Tokenizer, train split and evaluation data of a prepared dataset (see the module docstring)."""
    if any(setup.normalize_options.values()):
        raise ValueError(
            f"tree normalization options {setup.normalize_options} apply to tree files; the prepared dataset "
            f"{str(directory)!r} was normalized when it was prepared (see its {PREPARE_RECORD})"
        )
    dataset, record = load_prepared_dataset(directory)
    if "train" not in dataset:
        raise ValueError(f"prepared dataset {str(directory)!r} has no train split; its splits are {list(dataset)}")
    tokenizer = prepared_tokenizer(directory, setup.tokenizer)
    if tokenizer.linearization != linearization_of(grammar):
        readers = grammars_of_linearization(tokenizer.linearization)
        hint = f" (read by {' or '.join(readers)}: e.g. --set grammar={readers[0]})" if readers else ""
        raise ValueError(
            f"the tokenizer of {str(directory)!r} linearizes {tokenizer.linearization!r}{hint}; the {grammar} grammar "
            f"needs {linearization_of(grammar)!r}"
        )
    log(f"prepared dataset {directory}: {len(dataset['train']):,} training examples")
    inputs = PreparedInputs(directory=Path(directory), record=record, tokenizer=tokenizer, train=dataset["train"])
    eval_dir = prepared_dataset_dir(setup.eval) if setup.eval else None
    if eval_dir is not None:
        eval_data, _ = load_prepared_dataset(eval_dir)
        difference = tokenizer_difference(prepared_tokenizer(eval_dir), tokenizer)
        if difference:
            raise ValueError(
                f"prepared evaluation data {str(eval_dir)!r} was made with another tokenizer: {difference}"
            )
        split = _eval_split(eval_data)
        if split is None:
            raise ValueError(f"prepared evaluation data {str(eval_dir)!r} has no {' or '.join(EVAL_SPLIT_NAMES)} split")
        inputs.eval, inputs.eval_source = eval_data[split], f"{eval_dir}:{split}"
    elif setup.eval and not format_of_tokenizer(tokenizer).from_tree_files:
        trees = format_of_tokenizer(tokenizer)
        raise ValueError(
            f"--eval {', '.join(map(str, setup.eval))}: {trees.name} models evaluate on prepared data; pass a folder "
            f"made by `hf-slm data prepare --loader {trees.data_loader} --tokenizer "
            f"{Path(directory) / TOKENIZER_FOLDER}` (its validation split), or leave --eval out to use the validation "
            "split of --train"
        )
    elif setup.eval:
        # Raw tree files get the tokenizer's normalization, the one the prepared trees had.
        inputs.eval_trees = read_trees(setup.eval, **tokenizer.normalization)
        inputs.eval_source = ", ".join(map(str, setup.eval))
    else:
        split = _eval_split(dataset)
        if split is not None:
            inputs.eval, inputs.eval_source = dataset[split], f"{directory}:{split}"
    return inputs


@dataclass
class TrainingSetup:
    """Everything `hf-slm train` needs, with the preset's values as defaults."""

    preset: str
    train: list
    output: str
    eval: list = field(default_factory=list)
    tokenizer: str | None = None
    vocab_size: int | None = None
    model_overrides: dict = field(default_factory=dict)
    max_steps: int | None = None
    batch_size: int | None = None
    learning_rate: float | None = None
    warmup_steps: int | None = None
    embedding_learning_rate_multiplier: float | None = None  # None: the preset's (1.0 unless it says otherwise)
    eval_steps: int = 200
    save_steps: int = 200
    logging_steps: int = 20
    seed: int = 0
    resume: bool = False
    normalize_options: dict = field(default_factory=dict)
    label_files: list = field(default_factory=list)  # tree files whose labels (only) join the vocabulary
    group_by_length: bool = True
    disable_progress: bool = False
    max_seconds: float | None = None
    overwrite: bool = False  # replace a trained model (or an interrupted run's checkpoints) in `output`
    # Transformer-XL segment recurrence (hf_slm/training/segment_training.py): sequences of any length, read L positions
    # at a time with a memory of M slots (default L) updated by `memory_update` (default: the grammar's). None: on
    # documents, the preset's L and M (paper 000's Figure 9: `apply_document_settings`), else none; 0: none.
    segment_length: int | None = None
    memory_length: int | None = None
    memory_update: str | None = None
    # A new tokenizer's vocabulary: "sentencepiece", "byte_bpe" or "words" (a word vocabulary with unknown-word classes,
    # paper 000's PTB set-up). None: the preset's (its training "pieces"; paper 000's PTB presets name "words"), unless
    # vocab_size asks for a number of pieces; else SentencePiece.
    pieces: str | None = None
    # Low precision (issue 18): "bf16" or "fp16" runs the forward under torch.autocast (TrainingArguments' bf16 /
    # fp16; the weights and the optimizer stay float32); None trains in float32.
    mixed_precision: str | None = None
    # Batches whose gradients one optimizer step sums (TrainingArguments' gradient_accumulation_steps): the step
    # reads batch_size x processes x this many sequences.
    gradient_accumulation_steps: int = 1
    # Pack whole sentences into training sequences of at most this many positions (paper 003, Appendix A;
    # hf_slm/data/packing.py): None, the preset's (paper 003's: its cutoff length); 0, one sentence per sequence.
    pack_to: int | None = None


# Files that make a folder hold a trained model (with config.json).
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")


def holds_trained_model(directory):
    """Whether `directory` holds a saved model: config.json and weights."""
    directory = Path(directory)
    return (directory / "config.json").is_file() and any((directory / name).is_file() for name in WEIGHT_FILES)


def _check_output(setup, log):
    """Refuse to train over a model or an interrupted run's checkpoints unless overwrite or resume (module
    docstring); with overwrite, remove what described the old model."""
    output = Path(setup.output)
    if setup.overwrite and setup.resume:
        raise ValueError("--overwrite (train a new model) and --resume (continue the one in --output) contradict "
                         "each other; pass one of them")
    checkpoints = sorted(output.glob("checkpoint-*"))
    if not setup.overwrite and not setup.resume:
        if holds_trained_model(output):
            raise ValueError(f"output {str(output)!r} holds a trained model (config.json and weights); pass "
                             "--overwrite to replace it, --resume to continue its training, or choose another --output")
        if checkpoints:
            raise ValueError(f"output {str(output)!r} holds the checkpoints of an earlier run ({checkpoints[-1].name}); "
                             "pass --resume to continue it, --overwrite to start over, or choose another --output")
    if setup.overwrite:
        for stale in checkpoints + [output / "eval_results", output / PARTIAL]:
            if stale.is_dir():
                shutil.rmtree(stale)
                log(f"removed {stale} (it belonged to the model being replaced)")


def resumed_tokenizer(output, tokenizer_dir=None, log=None):
    """The tokenizer of the run being resumed: the one saved in the last complete checkpoint of `output` (else in
    `output`); `log` is told of incomplete checkpoints passed over. `tokenizer_dir` (--tokenizer), when given, must
    give the same ids."""
    checkpoint = checkpoint_to_resume(output, log)
    source = Path(checkpoint) if (Path(checkpoint) / "tokenizer_config.json").is_file() else Path(output)
    tokenizer = load_syntactic_tokenizer(source)
    if tokenizer_dir is not None:
        difference = tokenizer_difference(tokenizer, load_syntactic_tokenizer(tokenizer_dir))
        if difference:
            raise ValueError(f"--tokenizer {str(tokenizer_dir)!r} does not match the tokenizer of the run being "
                             f"resumed ({source}): {difference}; leave --tokenizer out to resume with the saved one")
    return tokenizer, source


def train(setup, log=print):
    """Train a model as `setup` says; return (trainer, tokenizer). Checkpoints go to setup.output, which is
    locked while training writes it; an existing model there is refused unless setup.overwrite or setup.resume
    (module docstring).

    Under `torchrun` / `accelerate launch` (hf_slm/runs/distributed.py) the main process holds the lock, checks the
    output folder, trains the tokenizer and writes every file; the others wait for it and read its tokenizer.
    """
    precision_arguments(setup)  # checked before any work
    if not is_main_process():
        log = _say_nothing  # one process speaks for all
    with main_process_context(output_lock(setup.output, log=log), f"locking the output folder {setup.output}"):
        return _train(setup, log)


def _say_nothing(*_):
    pass


def _train(setup, log):
    family, _ = preset_of(setup.preset)  # an unknown name: the error lists every family's presets
    return family.train(setup, log)


def train_grammar_model(setup, log):
    """Train a model of a family with grammars (Family.train's default; `train` checked the setup and locked the
    output folder)."""
    _, preset = preset_of(setup.preset)
    grammar = grammar_to_train(setup, preset)
    schedule = training_schedule(setup, preset)
    _check_data_paths(setup)
    output = Path(setup.output)
    on_main_process(lambda: _check_output(setup, log), f"checking the output folder {setup.output}")
    resumed_run = resumed_tokenizer(output, setup.tokenizer, log) if setup.resume else (None, None)
    prepared = prepared_dataset_dir(setup.train)
    _check_vocabulary_and_data_format(setup, preset, grammar, prepared)
    data = training_data(setup, preset, grammar, prepared, resumed_run, log)
    config = model_config(setup, preset, grammar, data, schedule, log)
    setup.pack_to = packing_length(setup, preset["training"], config)
    model = new_model(setup, preset, grammar, config, log)
    train_dataset, eval_dataset = training_datasets(setup, grammar, config, data, log)
    trainer = run_trainer(setup, model, data.tokenizer, train_dataset, eval_dataset, schedule,
                          packed=bool(setup.pack_to))
    if is_main_process():
        write_training_record(output, setup, grammar, schedule, trainer, len(train_dataset),
                              len(eval_dataset or []), prepared=data.description())
    return trainer, data.tokenizer


def grammar_to_train(setup, preset):
    """The grammar the run trains: the preset's, or `--set grammar=dtg_swift`'s with the preset's sizes (the data, the
    collator and the checks follow it, not only the config)."""
    grammar = setup.model_overrides.get("grammar", preset["model"]["grammar"])
    if not isinstance(grammar, str):
        raise ValueError(f"--set grammar={grammar!r}: expected a grammar name")
    grammar_class(grammar)  # an unknown name: the error lists them
    return grammar


# The schedule's entries the command may set (TrainingSetup's fields of the same names), over the preset's.
SCHEDULE_OPTIONS = ("max_steps", "batch_size", "learning_rate", "warmup_steps", "embedding_learning_rate_multiplier")


def training_schedule(setup, preset):
    """The preset's training schedule with the command's values where it gives them."""
    schedule = {"embedding_learning_rate_multiplier": 1.0, **preset["training"]}
    for name in SCHEDULE_OPTIONS:
        if getattr(setup, name) is not None:
            schedule[name] = getattr(setup, name)
    return schedule


def _check_data_paths(setup):
    for path in list(setup.train) + list(setup.eval):
        if not Path(path).exists():
            raise ValueError(f"tree file {str(path)!r} does not exist")


def _check_vocabulary_and_data_format(setup, preset, grammar, prepared):
    """Refuse, before any work, a vocabulary option for a tokenizer this run does not train, and tree files for a
    grammar whose trees they do not hold (`prepared`: the prepared dataset folder of --train, or None)."""
    if setup.pieces is not None and (setup.resume or setup.tokenizer or prepared is not None):
        raise ValueError(f"--pieces {setup.pieces}: it chooses the piece model of a tokenizer trained here, and this run "
                         "uses a given one (--tokenizer, --resume or the prepared dataset's); leave --pieces out")
    new_vocabulary(setup, preset)  # --pieces words with --vocab-size
    trees = format_of_grammar(grammar)
    if prepared is None and not trees.from_tree_files:
        raise ValueError(
            f"--train {', '.join(map(str, setup.train))}: the {grammar} grammar trains on {trees.description} "
            f"prepared by `hf-slm data prepare --loader {trees.data_loader} --grammar {grammar} ...`; pass that folder "
            "(tree files hold bracketed trees)"
        )


@dataclass
class TrainingData:
    """What a run trains on: a prepared dataset (`prepared`) or tree files (`train_trees`), evaluation trees when
    --eval gives tree files, and the tokenizer that encodes them."""

    tokenizer: object
    prepared: PreparedInputs | None = None
    train_trees: list = field(default_factory=list)
    eval_trees: list = field(default_factory=list)

    @property
    def document_level(self):
        return self.prepared is not None and self.prepared.document_level

    def description(self):
        """training_setup.json's prepared_dataset entry: None for tree files."""
        return self.prepared.description() if self.prepared is not None else None


def training_data(setup, preset, grammar, prepared, resumed_run, log):
    """The run's data and tokenizer, from the prepared dataset folder `prepared` or from tree files. `resumed_run`:
    the (tokenizer, folder) of the run being resumed (resumed_tokenizer), or (None, None)."""
    if prepared is not None:
        return _prepared_training_data(setup, grammar, prepared, resumed_run, log)
    log(f"reading trees from {', '.join(map(str, setup.train))}")
    train_trees = read_trees(setup.train, **setup.normalize_options)
    eval_trees = read_trees(setup.eval, **setup.normalize_options) if setup.eval else []
    tokenizer = tree_file_tokenizer(setup, preset, grammar, resumed_run, train_trees, eval_trees, log)
    return TrainingData(tokenizer, train_trees=train_trees, eval_trees=eval_trees)


def _prepared_training_data(setup, grammar, prepared, resumed_run, log):
    """A prepared dataset's data with its tokenizer, which must be that of the run being resumed, if any."""
    inputs = prepared_inputs(prepared, setup, grammar, log)
    resumed, resumed_from = resumed_run
    difference = tokenizer_difference(resumed, inputs.tokenizer) if resumed is not None else None
    if difference:
        raise ValueError(f"the prepared dataset {str(prepared)!r} was made with another tokenizer than the run "
                         f"being resumed ({resumed_from}): {difference}; resume on data prepared with that one")
    return TrainingData(inputs.tokenizer, prepared=inputs, eval_trees=inputs.eval_trees)


def tree_file_tokenizer(setup, preset, grammar, resumed_run, train_trees, eval_trees, log):
    """The tokenizer that encodes tree files: the resumed run's, the given one (--tokenizer) or one trained here on
    the training trees; a resumed or given one must linearize the trees as the grammar reads them."""
    resumed, resumed_from = resumed_run
    if resumed is not None:
        log(f"resuming with the tokenizer saved in {resumed_from} (not trained again)")
        if resumed.linearization != linearization_of(grammar):
            raise ValueError(f"the run being resumed ({resumed_from}) linearizes {resumed.linearization!r}; "
                             f"the {grammar} grammar of preset {setup.preset!r} needs "
                             f"{linearization_of(grammar)!r}")
        return resumed
    if setup.tokenizer:
        tokenizer = load_syntactic_tokenizer(setup.tokenizer)
        if tokenizer.linearization != linearization_of(grammar):
            raise ValueError(
                f"tokenizer {setup.tokenizer!r} linearizes {tokenizer.linearization!r}; the {grammar} grammar "
                f"needs {linearization_of(grammar)!r}"
            )
        return tokenizer
    return new_tokenizer(setup, preset, grammar, train_trees, eval_trees, log)


def new_tokenizer(setup, preset, grammar, train_trees, eval_trees, log):
    """A tokenizer trained on the training trees (by the main process only: trained_once): of the class the grammar's
    family trains, in the grammar's linearization, with the vocabulary the run asks for (new_vocabulary)."""
    family = family_for_grammar(grammar)
    piece_model = new_vocabulary(setup, preset)
    if setup.pieces is None and piece_model not in family.piece_models:
        piece_model = None  # `--set grammar=...` of another family: the preset's vocabulary is not its own
    tokenizer_class = family.tokenizer_class_for(piece_model)
    size = {}
    if piece_model == "words":  # the data sets its size: the words seen twice, the others' classes
        log(f"training a word vocabulary ({tokenizer_class.__name__}: words seen twice or more, the others as "
            f"unknown-word classes) on {len(train_trees)} trees")
    else:
        # the preset's only when not given (a preset may have none: the user's is then required)
        size["vocab_size"] = setup.vocab_size if setup.vocab_size is not None else preset["model"]["vocab_size"]
        log(f"training a {piece_model or 'sentencepiece'} tokenizer ({tokenizer_class.__name__}, "
            f"{size['vocab_size']} pieces requested) on {len(train_trees)} trees")
    # The trees are already normalized; the options are stored so that tree strings encoded later get the same
    # normalization. A tokenizer of unlabeled trees has no labels to learn.
    labels = {} if family.unlabelled_trees else dict(extra_nonterminals={
        node.label() for tree in eval_trees + read_trees(setup.label_files, **setup.normalize_options)
        for node in tree.subtrees()})
    pieces = {} if piece_model is None else {"pieces": piece_model}
    return trained_once(lambda: tokenizer_class.train(
        train_trees, **size, linearization=linearization_of(grammar), **labels,
        **pieces, **setup.normalize_options), Path(setup.output))


def model_config(setup, preset, grammar, data, schedule, log):
    """The model's config: the preset's with the command's --set values, document level for prepared documents (with
    the preset's document settings: apply_document_settings) and what the tokenizer fixes (tokenizer_overrides),
    checked against the tokenizer."""
    overrides = dict(setup.model_overrides)
    if data.document_level:
        # Documents (several trees after one <s>) need a document-level grammar in the model and the collator.
        if overrides.get("document_level", True) is not True:
            raise ValueError(f"prepared dataset {str(data.prepared.directory)!r} holds documents; it needs "
                             "document_level=true")
        overrides["document_level"] = True
        apply_document_settings(setup, preset["training"], schedule, log)
    if setup.segment_length == 0:  # --segment-length 0: whole sequences, no segment recurrence
        setup.segment_length = None
    config = preset_config(setup.preset, **tokenizer_overrides(overrides, grammar, data.tokenizer))
    check_tokenizer_matches(config, data.tokenizer)
    return config


def tokenizer_overrides(overrides, grammar, tokenizer):
    """`overrides` (the model's --set values) with what the tokenizer fixes of the model: its id layout, its word
    boundaries (so that the checkpoint generates whole words by itself), its vocabulary and what else the grammar's
    family's config takes from it (a variant gives the same vocabulary other sequences: the model reads the
    tokenizer's, and a --set value that differs is refused)."""
    overrides = {**overrides, **tokenizer.action_layout, **word_boundary_fields(tokenizer)}
    for name, value in family_for_grammar(grammar).tokenizer_config_fields(tokenizer).items():
        if overrides.setdefault(name, value) != value:
            raise ValueError(f"--set {name}={overrides[name]}: the tokenizer's ids are those of {name} {value!r}; "
                             f"prepare the data with a tokenizer of {name} {overrides[name]!r} instead")
    overrides["vocab_size"] = len(tokenizer)
    overrides["vocabulary_fingerprint"] = tokenizer.vocabulary_fingerprint
    return overrides


def new_model(setup, preset, grammar, config, log):
    """The model to train, initialized from setup.seed; with segment recurrence, its config keeps the segment options
    (record_segment_options)."""
    torch.manual_seed(setup.seed)
    model = causal_lm_for_config(config)
    log(f"model: {_model_description(setup, preset, grammar)}, {sum(p.numel() for p in model.parameters()):,} parameters")
    if setup.segment_length is not None:
        record_segment_options(model, setup)
    return model


def training_datasets(setup, grammar, config, data, log):
    """(train, eval) datasets of action ids: evaluation data from the prepared dataset or the evaluation trees (None
    without, and with segment recurrence, which does not evaluate during training); training sentences packed into
    sequences with setup.pack_to."""
    # With segments a sequence may be as long as it is: the model reads L positions at a time.
    max_length = config.max_sequence_length if setup.segment_length is None else math.inf
    train_dataset, eval_dataset = _id_datasets(data, grammar, max_length)
    if setup.pack_to:
        train_dataset = _packed_training_dataset(train_dataset, grammar, data.tokenizer, setup.pack_to, log)
    if setup.segment_length is not None and eval_dataset is not None:
        log("segment recurrence: no evaluation during training (the evaluation data is not used here); measure it "
            "afterwards with `hf-slm eval ppl`")
        eval_dataset = None
    return train_dataset, eval_dataset


def _id_datasets(data, grammar, max_length):
    """(train, eval) datasets of the prepared dataset's ids or of the trees encoded (evaluation trees win over a
    prepared dataset's evaluation split); eval None without evaluation data."""
    tokenizer, inputs = data.tokenizer, data.prepared
    if inputs is not None:
        train_dataset = ids_dataset(inputs.train, tokenizer, grammar, max_length, f"{inputs.directory} split 'train'")
        eval_dataset = (ids_dataset(inputs.eval, tokenizer, grammar, max_length, inputs.eval_source)
                        if inputs.eval is not None else None)
    else:
        train_dataset = tree_dataset(tokenizer, data.train_trees, grammar, max_length, "training trees")
        eval_dataset = None
    if data.eval_trees:
        eval_dataset = tree_dataset(tokenizer, data.eval_trees, grammar, max_length, "evaluation trees")
    return train_dataset, eval_dataset


def _packed_training_dataset(train_dataset, grammar, tokenizer, pack_to, log):
    """The training sentences packed side by side into sequences of at most `pack_to` positions."""
    sentences = len(train_dataset)
    lengths = expanded_lengths(train_dataset, doubled_id_ranges(grammar, tokenizer.action_layout))
    packed = packed_dataset(train_dataset, lengths, pack_to, "training data")
    log(f"packing: {sentences:,} training sentences into {len(packed):,} sequences of at most {pack_to} "
        "positions, each sentence read as alone (--pack-to 0: one sentence per sequence)")
    return packed


def packing_length(setup, training, config):
    """The positions a packed training sequence holds (hf_slm/data/packing.py), or None: --pack-to, else the preset's
    `pack_to` (0 or absent: no packing). Packing reads sentences alone: documents, segment recurrence and unrestricted
    heads (whose causal mask spans a row) are refused with it."""
    pack_to = setup.pack_to if setup.pack_to is not None else training.get("pack_to")
    if not pack_to:
        return None
    given = f"--pack-to {pack_to}" if setup.pack_to is not None else f"preset {setup.preset!r}'s packing ({pack_to})"
    if config.document_level:
        raise ValueError(f"{given}: packing puts sentences side by side, each read alone, and this data holds documents "
                         "(document_level); pass --pack-to 0")
    if setup.segment_length:
        raise ValueError(f"{given}: segment recurrence reads long sequences through a memory, packing puts short ones "
                         "side by side; choose one (--pack-to 0 or --segment-length 0)")
    if not config.reads_packed_sentences:
        raise ValueError(f"{given}: packing puts sentences side by side, each read alone through its grammar's structure, "
                         f"and a {config.model_type} model reads a row as one sequence; pass --pack-to 0")
    if config.num_unrestricted_heads or config.num_unrestricted_layers:
        raise ValueError(f"{given}: unrestricted heads attend causally across the whole row, from one sentence into the "
                         "next; pass --pack-to 0")
    return int(pack_to)


def new_vocabulary(setup, preset):
    """The vocabulary a tokenizer trained by this run builds (TrainingSetup.pieces): the command's --pieces, else the
    preset's training "pieces" unless --vocab-size asks for a number of pieces, else None (SentencePiece)."""
    if setup.pieces == "words" and setup.vocab_size is not None:
        raise ValueError(f"--vocab-size {setup.vocab_size}: a word vocabulary (--pieces words) has the size of the data "
                         "(the words seen twice or more, the others as unknown-word classes); leave one of them out")
    if setup.pieces is not None or setup.vocab_size is not None:
        return setup.pieces
    return preset["training"].get("pieces")


def apply_document_settings(setup, training, schedule, log):
    """What a preset says of training on documents (paper 000's Figure 9: segment length L, memory length M, and the
    BLLIP-LG document batch, 64 documents where sentences train 176 at a time), applied to `setup` and `schedule`
    where the command gave no value of its own: --segment-length (0: whole documents, no segments), --memory-length
    (with --segment-length alone M is L, as before) and --batch-size win."""
    if setup.segment_length is None and training.get("segment_length") is not None:
        setup.segment_length = training["segment_length"]
        if setup.memory_length is None:
            setup.memory_length = training.get("memory_length")
        log(f"documents: segment recurrence with preset {setup.preset!r}'s segment length {setup.segment_length} and "
            f"memory length {setup.memory_length or setup.segment_length} (--segment-length 0 reads whole documents)")
    if setup.batch_size is None and training.get("document_batch_size") is not None:
        schedule["batch_size"] = training["document_batch_size"]
        log(f"documents: preset {setup.preset!r}'s document batch, {schedule['batch_size']} sequences")


# Where the main process leaves the tokenizer it trained for the other processes to load (removed once they have).
TOKENIZER_HANDOFF = ".tokenizer-for-processes"


def trained_once(train_tokenizer, output):
    """The tokenizer `train_tokenizer()` makes, trained by the main process only: SentencePiece training is not
    deterministic across processes, and every process must encode with the same ids. The others load what the
    main process saved in `<output>/.tokenizer-for-processes`."""
    if not is_distributed():
        return train_tokenizer()
    handoff = Path(output) / TOKENIZER_HANDOFF
    made = {}

    def train_and_save():
        made["tokenizer"] = train_tokenizer()
        made["tokenizer"].save_pretrained(str(handoff))

    on_main_process(train_and_save, "training the tokenizer")
    tokenizer = made["tokenizer"] if is_main_process() else load_syntactic_tokenizer(handoff)
    barrier()  # every process has read it
    if is_main_process():
        shutil.rmtree(handoff, ignore_errors=True)
    return tokenizer


DEFAULT_MAX_GRAD_NORM = 3.0


def run_trainer(setup, model, tokenizer, train_dataset, eval_dataset, schedule, packed=False):
    """The training loop shared by `hf-slm train` and `hf-slm finetune` (hf_slm/summarization/finetuning.py): our
    collator (per-action labels pass through it; with `packed`, the training examples are rows of packed sentences:
    hf_slm/data/packing.py), Adam with the warm-up/cosine schedule, transformers.Trainer resuming from the last
    checkpoint when setup.resume; the final model and tokenizer saved to setup.output (safetensors and JSON only).
    Returns the Trainer."""
    # The family's collator of the model's own grammar, which the tokenizer's ids were checked to match.
    collator = family_for_config(model.config).collator(model, tokenizer, **({"packed": True} if packed else {}))
    optimizer, scheduler = schedule_optimizer(model, schedule)
    # gradients clipped to norm 3 as paper 000's reference, unless a preset's schedule says otherwise (RNNG's: 5)
    args = training_arguments(setup, schedule, eval_dataset is not None,
                              max_grad_norm=schedule.get("max_grad_norm", DEFAULT_MAX_GRAD_NORM))
    segments = getattr(setup, "segment_length", None) is not None  # hf-slm train's option (not fine-tuning's)
    if is_distributed() and not segments:  # (SegmentTrainer averages gradients itself)
        # DistributedDataParallel's search for unused parameters costs a graph traversal every step: only where
        # the configuration has some.
        unused = unused_parameter_names(model, collator, train_dataset, schedule["batch_size"])
        args.ddp_find_unused_parameters = bool(unused)
        if unused and is_main_process():
            print("parameters without gradients (DistributedDataParallel looks for them every step): "
                  + ", ".join(unused[:10]) + (" ..." if len(unused) > 10 else ""))
    callbacks = [] if setup.max_seconds is None else [_TimeLimit(setup.max_seconds)]
    if segments:
        # batch_size streams per process (segment_training.py: N processes read the streams of N x the batch)
        streams = DocumentStreams(model.grammar, train_dataset["input_ids"], schedule["batch_size"],
                                  setup.segment_length, setup.memory_length, setup.memory_update,
                                  disable_progress=setup.disable_progress, process_index=rank(),
                                  processes=world_size())
        trainer = SegmentTrainer(model=model, args=args, train_dataset=streams, optimizers=(optimizer, scheduler),
                                 callbacks=callbacks, processing_class=tokenizer)
    else:
        trainer = SyntacticTrainer(
            model=model, args=args, train_dataset=train_dataset, eval_dataset=eval_dataset, data_collator=collator,
            optimizers=(optimizer, scheduler), callbacks=callbacks, processing_class=tokenizer,
        )
    return train_and_save(trainer, setup, tokenizer)


def short_warmup_warning(schedule):
    """What a run that stops inside its warm-up must be told (None when it does not): its learning rate never rises
    to the peak and never decays, so a short run of a paper preset (6,000 warm-up steps) learns next to nothing."""
    steps, warmup = schedule["max_steps"], schedule["warmup_steps"]
    if steps > warmup:
        return None
    reached = warmup_cosine_schedule(steps, warmup, steps, schedule["initial_learning_rate"],
                                     schedule["learning_rate"], schedule["final_learning_rate"])
    return (f"warning: {steps} training steps end inside the warm-up of {warmup} steps: the learning rate rises to "
            f"{reached:.3g} at most (the peak is {schedule['learning_rate']:g}) and never decays; give --warmup-steps "
            f"below --max-steps (e.g. --warmup-steps {max(1, steps // 10)}) or train longer")


def schedule_optimizer(model, schedule):
    """(optimizer, scheduler) of a preset's schedule: Adam with the warm-up / cosine schedule (make_optimizer). A run
    that ends inside its warm-up says so on stderr (short_warmup_warning)."""
    warning = short_warmup_warning(schedule)
    if warning is not None and is_main_process():
        print(warning, file=sys.stderr)
    return make_optimizer(model, schedule["learning_rate"], schedule["warmup_steps"], schedule["max_steps"],
                          schedule["initial_learning_rate"], schedule["final_learning_rate"],
                          schedule["embedding_learning_rate_multiplier"])


def training_arguments(setup, schedule, evaluates, max_grad_norm, **overrides):
    """The TrainingArguments every family trains with (`overrides` for a family's own): the schedule's steps and
    batch, checkpoints every save_steps (two kept, for --resume), evaluation loss when `evaluates`, length-grouped
    batches, the precision options.

    With evaluation the final model is the checkpoint of lowest evaluation loss, as the papers select (paper 000,
    section 3 and Appendix B): Trainer's load_best_model_at_end, which can choose among evaluated checkpoints only,
    so evaluation runs at every save too (every gcd(eval_steps, save_steps) steps)."""
    best = dict(load_best_model_at_end=True, metric_for_best_model="eval_loss", greater_is_better=False) \
        if evaluates else {}
    eval_steps = math.gcd(setup.eval_steps, setup.save_steps) if evaluates else setup.eval_steps
    arguments = dict(
        output_dir=str(setup.output),
        max_steps=schedule["max_steps"],
        per_device_train_batch_size=schedule["batch_size"],
        per_device_eval_batch_size=schedule["batch_size"],
        max_grad_norm=max_grad_norm,
        logging_steps=setup.logging_steps,
        eval_strategy="steps" if evaluates else "no",
        eval_steps=eval_steps,
        save_strategy="steps",
        save_steps=setup.save_steps,
        save_total_limit=2,
        seed=setup.seed,
        data_seed=setup.seed,
        report_to=[],
        use_cpu=not torch.cuda.is_available(),
        disable_tqdm=setup.disable_progress,
        dataloader_num_workers=0,
        # Batches of similar lengths waste less on padding: the [B, T', T'] attention grows with the longest (and
        # a recurrent model steps through the longest sentence of its batch).
        train_sampling_strategy="group_by_length" if setup.group_by_length else "random",
        **precision_arguments(setup),
        **best,
    )
    return TrainingArguments(**{**arguments, **overrides})


def train_and_save(trainer, setup, tokenizer):
    """Train (resuming from the last checkpoint with setup.resume), then save the final model and tokenizer to
    setup.output: safetensors and JSON only. Returns the trainer."""
    output = Path(setup.output)
    checkpoint = checkpoint_to_resume(output) if setup.resume else None
    if checkpoint is not None:
        plan = resume_plan(checkpoint, trainer.args.max_steps)  # (a ValueError on every process)
        if is_main_process():
            print(plan)
    trainer.train(resume_from_checkpoint=checkpoint)
    trainer.save_model(str(output))  # by the main process only (Trainer's should_save)
    if is_main_process():
        # save_model also pickles the TrainingArguments; the final model folder keeps safetensors and JSON only
        # (training_setup.json records the setup). The checkpoint-* folders keep theirs, for --resume.
        (output / "training_args.bin").unlink(missing_ok=True)
        tokenizer.save_pretrained(str(output))
    return trainer


MIXED_PRECISIONS = ("bf16", "fp16")


def precision_arguments(setup):
    """TrainingArguments' bf16 / fp16 and gradient_accumulation_steps from the setup (FinetuneSetup too), checked."""
    precision = getattr(setup, "mixed_precision", None)
    if precision is not None and precision not in MIXED_PRECISIONS:
        raise ValueError(f"mixed precision {precision!r}: expected one of {list(MIXED_PRECISIONS)} (or none: float32)")
    steps = getattr(setup, "gradient_accumulation_steps", 1)
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"--gradient-accumulation-steps {steps!r}: expected a positive number of batches per step")
    if steps > 1 and getattr(setup, "segment_length", None):  # (0: no segments)
        raise ValueError(f"--gradient-accumulation-steps {steps}: segment recurrence carries its memory from one "
                         "batch to the next and steps after every batch; leave it out with --segment-length")
    return {"bf16": precision == "bf16", "fp16": precision == "fp16", "gradient_accumulation_steps": steps}


def unused_parameter_names(model, collator, dataset, batch_size):
    """Names of the trainable parameters that one forward and backward pass over the first `batch_size`
    training examples leaves without a gradient (e.g. options a configuration switches off). The pass changes
    neither the weights nor the random state, and its gradients are discarded."""
    batch = collator([dataset[index] for index in range(min(batch_size, len(dataset)))])
    batch = {name: value.to(model.device) if torch.is_tensor(value) else value for name, value in batch.items()}
    model.zero_grad(set_to_none=True)
    with torch.random.fork_rng(devices=[]):
        model(**batch).loss.backward()
    unused = [name for name, parameter in model.named_parameters()
              if parameter.requires_grad and parameter.grad is None]
    model.zero_grad(set_to_none=True)
    return unused


def _predicted(inputs, pad_token_id):
    """[B, T - 1] bool: the shifted labels the model's loss averages over, neither -100, nor the pad id, nor under a
    0 of the [B, T] attention mask (SyntacticTransformerForCausalLM.forward's rule)."""
    labels = inputs["labels"]
    counted = (labels != -100) & (labels != pad_token_id)
    mask = inputs.get("attention_mask")
    if mask is not None and mask.shape == labels.shape:
        counted &= mask != 0
    return counted[:, 1:]


def predicted_actions(inputs, pad_token_id):
    """How many actions of a collated batch the model's loss averages over."""
    return _predicted(inputs, pad_token_id).sum()


def auxiliary_losses_of(config):
    """{loss name: action input} of the model's grammar (grammar.auxiliary_losses: the losses its output holds
    beside lm_loss, each a mean over the predicted actions whose entry in that input is not -1); none for a family
    without a grammar."""
    return grammar_for_config(config).auxiliary_losses if family_for_config(config).grammars else {}


def predicted_counts(inputs, pad_token_id, auxiliary_losses=None):
    """[1 + A] long: what the model's losses of a collated batch average over, the actions and then, for each of
    the A `auxiliary_losses` ({loss name: action input}), the predicted actions that have an entry in its input
    (paper 003's Nb-Up: the `)` starts; 0 when the batch does not hold the input)."""
    predicted = _predicted(inputs, pad_token_id)
    counts = [predicted.sum()]
    for action_input in (auxiliary_losses or {}).values():
        counts.append((predicted & (inputs[action_input][:, 1:] >= 0)).sum() if action_input in inputs
                      else torch.zeros_like(counts[0]))
    return torch.stack(counts)


def step_counts(batches, pad_token_id, gather, auxiliary_losses=None):
    """[1 + A] long: predicted_counts of a whole optimizer step, over its K accumulated batches and (`gather`
    collects a [1, 1 + A] tensor from every process) over every process: what the step's mean losses divide by. One
    collective per step; counted on the device the batches are on, so nothing is read back to the host."""
    counts = torch.stack([predicted_counts(batch, pad_token_id, auxiliary_losses) for batch in batches]).sum(0)
    return gather(counts[None]).sum(0)


def process_share_loss(loss, outputs, inputs, pad_token_id, gather, processes, totals=None, auxiliary_losses=None):
    """The loss of one batch of one process (`loss`, the model's `outputs`: means over the batch), weighted so that
    the gradients summed over the batches of an optimizer step (gradient accumulation) and averaged over the
    processes (DistributedDataParallel) are the gradient of the step's loss, the mean over all of the step's
    actions, as one batch holding all its rows would give: each mean is weighted by this batch's share of what it
    averages over, times the number of processes (the actions for the language-model loss, lm_loss; each of the
    grammar's `auxiliary_losses` by its own count, e.g. Nb-Up's start pointer by the `)` starts). `totals` are the
    step's counts (step_counts); without them the batch is the step's only one, and `gather` (which collects a
    1-element tensor from every process) sums them here."""
    auxiliary = {name: field for name, field in (auxiliary_losses or {}).items()
                 if hasattr(outputs, "get") and outputs.get(name) is not None}
    if totals is None:
        mine = predicted_counts(inputs, pad_token_id, auxiliary)
        shares = [process_share(count, gather, processes) for count in mine]
    else:
        mine = predicted_counts(inputs, pad_token_id, auxiliary_losses).to(totals.device)
        shares = list(mine * processes / totals.clamp(min=1))
        shares = [shares[0]] + [share for name, share in zip(auxiliary_losses or {}, shares[1:]) if name in auxiliary]
    if not auxiliary:
        return loss * shares[0].to(loss.dtype)
    weighted = outputs["lm_loss"] * shares[0].to(loss.dtype)
    for name, share in zip(auxiliary, shares[1:]):
        weighted = weighted + outputs[name] * share.to(loss.dtype)
    return weighted


class GlobalLengthGrouping:
    """Trainer mixin: length grouping groups the global batch (per-device batch x K accumulated batches x
    processes), each process reading its part, so that N processes together read the batches of one process with
    N times the batch (Trainer groups each process's batch on its own)."""

    def _get_train_sampler(self, train_dataset=None):
        sampler = super()._get_train_sampler(train_dataset)
        if isinstance(sampler, LengthGroupedSampler) and self.args.world_size > 1:
            global_batch = self.args.train_batch_size * self.args.gradient_accumulation_steps * self.args.world_size
            return LengthGroupedSampler(global_batch, lengths=sampler.lengths, generator=sampler.generator)
        return sampler


class SyntacticTrainer(WholeCheckpoints, GlobalLengthGrouping, Trainer):
    """Trainer whose N-process run with K accumulated batches per step takes the steps of a one-process run with
    N x K times the per-device batch.

    Two things differ from Trainer there. Length grouping groups the global batch (GlobalLengthGrouping).
    And the model's loss is a mean over the actions of its own rows, while the step sums the gradients of the K
    batches and DistributedDataParallel averages the processes': each batch's loss is weighted by its share of the
    step's actions (x N, which the averaging divides again), so that the step follows the mean over all the step's
    actions, however unevenly they fall into batches; each of the grammar's auxiliary losses by its share of what it
    averages over (paper 003's Nb-Up start pointer: the step's `)` starts; process_share_loss). The step's counts are what Trainer hands compute_loss as
    `num_items_in_batch`: get_batch_samples counts them (step_counts) when it fetches the step's batches.
    """

    # compute_loss weights each batch by its share of the whole step: Trainer must not divide by K again
    loss_is_scaled_for_ga = True

    def get_batch_samples(self, epoch_iterator, num_batches, device):
        """The step's K batches and, as `num_items_in_batch`, their counts summed over the processes (step_counts)
        instead of Trainer's count of labels that are not -100: the model's losses also skip the pad id, and a
        start pointer's loss averages over `)` starts. (The model does not take num_items_in_batch itself:
        accepts_loss_kwargs = False.)"""
        batches, _ = super().get_batch_samples(epoch_iterator, num_batches, device)
        if not batches or "labels" not in batches[0]:
            return batches, None
        config = self.accelerator.unwrap_model(self.model).config
        auxiliary = auxiliary_losses_of(config)
        gather = self.accelerator.gather if self.args.world_size > 1 else (lambda counts: counts)
        return batches, step_counts([_on(batch, device, auxiliary) for batch in batches], config.pad_token_id, gather,
                                    auxiliary)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        # num_items_in_batch: the step's counts (get_batch_samples), not Trainer's; the model's loss is its batch mean
        loss, outputs = super().compute_loss(model, inputs, return_outputs=True)
        if model.training and "labels" in inputs:
            config = self.accelerator.unwrap_model(model).config
            loss = process_share_loss(loss, outputs, inputs, config.pad_token_id, self.accelerator.gather,
                                      self.args.world_size, totals=num_items_in_batch,
                                      auxiliary_losses=auxiliary_losses_of(config))
        return (loss, outputs) if return_outputs else loss


def _on(batch, device, auxiliary_losses):
    """The tensors of a batch that step_counts reads, on `device` (the processes' counts are gathered there)."""
    names = ("labels", "attention_mask", *auxiliary_losses.values())
    return {name: batch[name].to(device) for name in names if name in batch}


def record_segment_options(model, setup):
    """Check the segment options against the model and keep them in its config (segment_length, memory_length,
    memory_update), so that evaluation reads documents the way the model was trained."""
    check_segment_model(model)
    L, M, rule = check_segment_options(model.grammar, setup.segment_length, setup.memory_length, setup.memory_update)
    model.config.segment_length, model.config.memory_length, model.config.memory_update = L, M, rule
    check_segment_position_range(model.config)
    setup.segment_length, setup.memory_length, setup.memory_update = L, M, rule


def write_training_record(output, setup, grammar, schedule, trainer, train_examples, eval_examples, prepared=None):
    """Write `<output>/training_setup.json`: what the model was trained on and how (read by `hf-slm card`).

    `prepared` describes a prepared dataset used for training (folder, loader, splits), None for tree files.

    JSON rather than Trainer's pickled training_args.bin, so that it can be published and read safely.
    """
    history = trainer.state.log_history
    train_losses = [entry["loss"] for entry in history if "loss" in entry]
    eval_losses = [entry["eval_loss"] for entry in history if "eval_loss" in entry]
    record = {
        "preset": setup.preset,
        "grammar": grammar,
        "train_data": [str(path) for path in setup.train],
        "eval_data": [str(path) for path in setup.eval],
        "train_examples": train_examples,
        "eval_examples": eval_examples,
        "normalization": setup.normalize_options,
        "prepared_dataset": prepared,
        "max_steps": schedule["max_steps"],
        "steps_done": trainer.state.global_step,
        "batch_size": schedule["batch_size"],
        "learning_rate": schedule["learning_rate"],
        "warmup_steps": schedule["warmup_steps"],
        "initial_learning_rate": schedule["initial_learning_rate"],
        "final_learning_rate": schedule["final_learning_rate"],
        "embedding_learning_rate_multiplier": schedule.get("embedding_learning_rate_multiplier", 1.0),
        "max_grad_norm": schedule.get("max_grad_norm", DEFAULT_MAX_GRAD_NORM),
        "seed": setup.seed,
        "mixed_precision": getattr(setup, "mixed_precision", None),
        "gradient_accumulation_steps": getattr(setup, "gradient_accumulation_steps", 1),
        "pack_to": getattr(setup, "pack_to", None),  # positions of a packed training sequence (hf_slm/data/packing.py)
        "segments": ({"segment_length": setup.segment_length, "memory_length": setup.memory_length,
                      "memory_update": setup.memory_update} if getattr(setup, "segment_length", None) else None),
        "final_train_loss": train_losses[-1] if train_losses else None,
        "final_eval_loss": eval_losses[-1] if eval_losses else None,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    path = Path(output) / "training_setup.json"
    path.write_text(json.dumps(record, indent=2) + "\n")
    return path


def _model_description(setup, preset, grammar):
    """The preset and what the run changed in its model ("tg-ptb (tg) with hidden_size=128, ..."), so that a log
    never names a preset's model for another one."""
    changed = {name: value for name, value in setup.model_overrides.items()
               if name != "grammar" and preset["model"].get(name) != value}
    described = f"{setup.preset} ({grammar})"
    if not changed:
        return described
    shown = [f"{name}={value}" for name, value in changed.items()]
    return f"{described} with " + ", ".join(shown[:4]) + (f" and {len(shown) - 4} more changes" if len(shown) > 4 else "")


class _TimeLimit(TrainerCallback):
    """Stop training after a wall-clock budget (the quickstart's guard on slow machines), evaluating and saving the
    last step: the best checkpoint chosen at the end (load_best_model_at_end) is then chosen among every step trained,
    not only among those before the last evaluation."""

    def __init__(self, seconds):
        self.seconds = seconds
        self.start = None

    def on_train_begin(self, args, state, control, **kwargs):
        self.start = time.monotonic()

    def on_step_end(self, args, state, control, **kwargs):
        if time.monotonic() - self.start > self.seconds:
            control.should_training_stop = True
            control.should_save = True
            control.should_evaluate = args.eval_strategy != "no"
        return control
