"""Helpers shared by the tests: a tiny saved checkpoint, and an interpreter where hf_slm cannot be imported."""

import contextlib
import os

import pytest
import torch

import hf_slm

# Under pytest-xdist (`-n N`) each worker takes its share of the cores, so that N workers do not each start
# one thread per core and wait on each other. The processes a test starts (hub code in a fresh interpreter, the
# command line, torchrun, the GPU script's dry run) inherit the share through OMP_NUM_THREADS, which torch reads when
# it is imported: with torch's default of a thread per core, a child running beside the other worker took twice as
# long (the family push and pipeline tests: 286 s against 146 s beside one busy core). One set by the user is kept.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    WORKER_THREADS = max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))
    torch.set_num_threads(WORKER_THREADS)
    os.environ.setdefault("OMP_NUM_THREADS", str(WORKER_THREADS))
from hf_slm.families import config_for_grammar
from hf_slm.families import causal_lm_for_config
from hf_slm.modeling.configuration_slm import word_boundary_fields

# Prepended to scripts run in a fresh interpreter: hf_slm and nltk cannot be imported there (a meta-path
# finder in front of every other, the editable install's included), so only a checkpoint's hub code serves.
ISOLATION_PREAMBLE = r'''
import importlib.abc, sys

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("hf_slm", "nltk"):
            raise ModuleNotFoundError(f"blocked: {name}")
        return None

sys.meta_path.insert(0, Block())
for blocked in ("hf_slm", "nltk"):
    try:
        __import__(blocked)
    except ModuleNotFoundError:
        pass
    else:
        raise SystemExit(f"{blocked} is importable: the isolation is not real")
'''


def run_without_hf_slm(script, arguments, tmp_path):
    """Run `script` (ISOLATION_PREAMBLE and the code after it) in a fresh interpreter where hf_slm cannot be
    imported, with its own HF_HOME (remote-code modules are cached there), and return what it saved with
    torch.save to the path given as its last argument, `tmp_path / "out.pt"`."""
    import os
    import subprocess
    import sys
    import textwrap

    path = tmp_path / "child.py"
    path.write_text(textwrap.dedent(script))
    env = dict(os.environ, HF_HOME=str(tmp_path / "hf_home"), PYTHONPATH="", PYTHONNOUSERSITE="1")
    result = subprocess.run([sys.executable, str(path), *map(str, arguments), str(tmp_path / "out.pt")], cwd=tmp_path,
                            env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return torch.load(tmp_path / "out.pt")


def save_tiny_checkpoint(directory, trees, vocab_size=30, grammar="tg", linearization=None, seed=0, **config):
    """Train a tokenizer on `trees`, build a small random model, save both to `directory`.

    The tokenizer is the one `hf-slm train` gives the grammar (its family's class, e.g. CompositionalTokenizer for
    paper 003's grammars), with the grammar's linearization unless `linearization` says otherwise (a dependency
    grammar's: its transition system, over dependency `trees`)."""
    from hf_slm.auto import tokenizer_class_for_grammar
    from hf_slm.families import grammar_class

    from helpers.family_sizes import TINY_SIZES, tiny_sizes

    from hf_slm.tokenization.tokenization_dependency import DependencyTokenizer

    tokenizer_class = tokenizer_class_for_grammar(grammar)
    linearization = linearization or grammar_class(grammar).linearization
    if issubclass(tokenizer_class, DependencyTokenizer):  # dependency trees: the transition system linearizes
        tokenizer = tokenizer_class.train(trees, vocab_size=vocab_size, transition_system=linearization)
    else:
        tokenizer = tokenizer_class.train(trees, vocab_size=vocab_size, linearization=linearization)
    # the sizes (given or TINY_SIZES) that its family's config takes, and every other field as given
    options = {name: value for name, value in config.items() if name not in TINY_SIZES}
    options.update(tiny_sizes(grammar, **{name: value for name, value in config.items() if name in TINY_SIZES}))
    model_config = config_for_grammar(vocab_size=len(tokenizer), grammar=grammar, **options,
                                      **tokenizer.action_layout, **word_boundary_fields(tokenizer))
    torch.manual_seed(seed)
    model = causal_lm_for_config(model_config).eval()
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory, model, tokenizer


# A small UD-style treebank for the dependency data path (words, 1-based heads; 0 = the root). The second
# training sentence is non-projective: "on" (5) hangs from "hearing" (2), and that arc crosses the root's arc to
# "scheduled" (4); lifting reattaches "on" to "scheduled", its head's head.
DEPENDENCY_TREEBANK = {
    "train": [(["Sam", "likes", "tea"], [2, 0, 2]),
              (["A", "hearing", "is", "scheduled", "on", "the", "issue", "today"], [2, 4, 4, 0, 2, 7, 5, 4]),
              (["The", "cat", "sleeps", "on", "the", "mat"], [2, 3, 0, 6, 6, 3]),
              (["Kim", "likes", "the", "cat", "today"], [2, 0, 4, 2, 2])],
    "dev": [(["Sam", "sleeps"], [2, 0])],
    "test": [(["the", "cat", "likes", "tea"], [2, 3, 0, 3])],
}
NON_PROJECTIVE_INDEX, LIFTED_HEADS = 1, [2, 4, 4, 0, 4, 7, 5, 4]


def write_conllu_treebank(directory, treebank=DEPENDENCY_TREEBANK):
    """Write `treebank` as en_mini-ud-{split}.conllu files (10 tab-separated fields per word) in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    for split, sentences in treebank.items():
        blocks = []
        for number, (words, heads) in enumerate(sentences, start=1):
            lines = [f"# sent_id = {split}-{number}", f"# text = {' '.join(words)}"]
            lines += [f"{position}\t{word}\t{word.lower()}\tX\t_\t_\t{head}\t{'root' if head == 0 else 'dep'}\t_\t_"
                      for position, (word, head) in enumerate(zip(words, heads), start=1)]
            blocks.append("\n".join(lines) + "\n")
        (directory / f"en_mini-ud-{split}.conllu").write_text("\n".join(blocks) + "\n", encoding="utf-8")
    return directory


def pytest_collection_modifyitems(items):
    """Modules marked slow first, each module's tests together and in their order: under `--dist loadfile` a
    worker takes one module at a time in this order, and a long module taken last would keep one worker busy
    alone at the end of the run."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # a stable sort keeps the rest in order


@pytest.fixture(scope="module")
def one_thread():
    """torch on one thread while a module runs: models 16 wide gain nothing from intra-op threads, and on a busy
    2-core machine torch's two threads waiting on a core another process holds made such tests 10x slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def host_reads(monkeypatch):
    """A HostReads mode (helpers/host_reads.py) that also catches the reads that bypass the dispatcher (tolist, numpy;
    cpu, a no-op on the CPU) and tensors made from host data inside the model (a copy from the host that waits on the
    device): the training step's and the beam search's tests count with it."""
    from helpers.host_reads import HostReads, watch_host_reads

    return watch_host_reads(monkeypatch, HostReads())


@contextlib.contextmanager
def transformers_messages():
    """The messages transformers' logger gives inside the block (a list filled as they come): Trainer's reload
    warnings, which pytest's caplog does not see (transformers' logger does not propagate)."""
    import logging

    from transformers.utils import logging as transformers_logging

    messages = []
    handler = logging.Handler()
    handler.emit = lambda record: messages.append(record.getMessage())
    logger = transformers_logging.get_logger("transformers")
    logger.addHandler(handler)
    try:
        yield messages
    finally:
        logger.removeHandler(handler)
