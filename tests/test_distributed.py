"""`torchrun --nproc_per_node=2 -m hf_slm.cli ...` on 2 CPU processes (gloo) against the same command on one
process (issue 18): training and fine-tuning take the same steps, evaluation (ppl, parse, sg, blimp, uas, rerank,
rouge) gives the same results.

The processes are real (python -m torch.distributed.run, gloo, CPU), with a timeout; the tests are skipped only
where torch.distributed or its gloo backend is missing. The commands compared run in two sessions, one process and
two (helpers/cli_session.py), each started once for the module: a launch per command spent most of the module's
time importing torch and transformers. The main training comparison launches `python -m torch.distributed.run
... -m hf_slm.cli train` itself, the command line a user types.
"""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers.cli_session import CliSession
from helpers.distributed import TIMEOUT_SECONDS, free_port, logged_losses, one_thread_environment, run_cli, train_args

pytestmark = pytest.mark.slow  # conftest.py: scheduled first

SAMPLE = Path(__file__).resolve().parents[1] / "hf_slm" / "sample_data" / "gum"

if not (torch.distributed.is_available() and torch.distributed.is_gloo_available()):
    pytest.skip("torch.distributed with the gloo backend is not available in this torch build",
                allow_module_level=True)


@pytest.fixture(scope="module")
def one_process():
    with CliSession(1) as session:
        yield session


@pytest.fixture(scope="module")
def two_processes():
    with CliSession(2) as session:
        yield session


@pytest.fixture(scope="module")
def training_trees(tmp_path_factory):
    directory = tmp_path_factory.mktemp("distributed_trees")
    path = directory / "train.txt"
    # 48 trees: Trainer's length grouping would group 8 trees at a time for batches of 8 and 12 for batches of 4,
    # so the two runs read the same batches only if the grouping is that of the global batch.
    path.write_text("\n".join((SAMPLE / "train.txt").read_text().splitlines()[:48]) + "\n")
    return path


@pytest.fixture(scope="module")
def training_runs(training_trees, one_process, tmp_path_factory):
    """The same 4 steps trained by one process with batches of 8 and by two with batches of 4 (checkpoints at
    steps 2 and 4): (folder, completed process) of each. The two processes are launched as a user launches them."""
    directory = tmp_path_factory.mktemp("distributed_training")
    one = one_process.run(train_args(training_trees, directory / "one", batch_size=8))
    two = run_cli(train_args(training_trees, directory / "two", batch_size=4, save_steps=2), processes=2)
    return (directory / "one", one), (directory / "two", two)


def test_two_processes_with_half_batches_take_the_steps_of_one_process(training_runs):
    from safetensors.torch import load_file

    (one_dir, _), (two_dir, two) = training_runs
    # The same batches (length grouping over the global batch, each process its half) and the same loss (each
    # process weighted by its share of the actions): the losses and weights of the 1-process run.
    single, double = logged_losses(one_dir, 4), logged_losses(two_dir, 4)
    assert sorted(single) == sorted(double) == [1, 2, 3, 4]
    for step in single:
        assert double[step] == pytest.approx(single[step], rel=1e-5, abs=1e-6), (step, single, double)
    first, second = load_file(one_dir / "model.safetensors"), load_file(two_dir / "model.safetensors")
    for name in first:
        torch.testing.assert_close(second[name], first[name], rtol=1e-4, atol=1e-4, msg=name)

    # One tokenizer (trained by the main process; the hand-off folder is gone), written once, by one process.
    assert (two_dir / "spiece.model").read_bytes() == (one_dir / "spiece.model").read_bytes()
    assert not (two_dir / ".tokenizer-for-processes").exists()
    assert two.stdout.count("saved the model and tokenizer") == 1, two.stdout
    assert two.stdout.count("training a sentencepiece tokenizer") == 1, two.stdout
    record = json.loads((two_dir / "training_setup.json").read_text())
    assert record["steps_done"] == 4 and record["batch_size"] == 4
    # This configuration uses every parameter: DistributedDataParallel is not asked to look for unused ones.
    assert "find_unused_parameters=True" not in two.stderr
    assert "parameters without gradients" not in two.stdout
    assert not (two_dir / ".hf-slm.lock").exists()


def test_resuming_under_two_processes_takes_the_same_next_steps(training_runs, training_trees, two_processes,
                                                                tmp_path):
    (one_dir, _), (two_dir, _) = training_runs
    shutil.copytree(two_dir / "checkpoint-2", tmp_path / "resumed" / "checkpoint-2")
    resumed = two_processes.run([*train_args(training_trees, tmp_path / "resumed", batch_size=4, save_steps=2),
                                 "--resume"])
    assert "resuming with the tokenizer saved in" in resumed.stdout and "training a" not in resumed.stdout
    single, again = logged_losses(one_dir, 4), logged_losses(tmp_path / "resumed", 4)
    for step in (3, 4):
        assert again[step] == pytest.approx(single[step], rel=1e-5, abs=1e-6), (step, single, again)


def test_two_processes_train_segments_like_one_and_resume_with_their_memories(training_trees, one_process,
                                                                             two_processes, tmp_path):
    """Segment recurrence (segment_training.py) under two processes of 2 streams each takes the steps of one process
    of 4 streams (the same streams, each process weighted by its share of the actions, gradients averaged by
    SegmentTrainer); each process saves its own memory, and a resumed run reads it back."""
    segments = ["--segment-length", "32", "--memory-length", "16"]
    one = tmp_path / "one"
    one_process.run([*train_args(training_trees, one, batch_size=4), *segments])
    two = tmp_path / "two"
    two_processes.run([*train_args(training_trees, two, batch_size=2, save_steps=2), *segments])
    single, double = logged_losses(one, 4), logged_losses(two, 4)
    assert sorted(single) == sorted(double) == [1, 2, 3, 4]
    for step in single:
        assert double[step] == pytest.approx(single[step], rel=1e-5, abs=1e-6), (step, single, double)
    assert {p.name for p in (two / "checkpoint-2").glob("segment_memory*")} == {
        "segment_memory.safetensors", "segment_memory.process1.safetensors"}
    resumed = tmp_path / "resumed"
    shutil.copytree(two / "checkpoint-2", resumed / "checkpoint-2")
    two_processes.run([*train_args(training_trees, resumed, batch_size=2, save_steps=2), *segments, "--resume"])
    again = logged_losses(resumed, 4)
    for step in (3, 4):
        assert again[step] == pytest.approx(double[step], rel=1e-6, abs=1e-7), (step, double, again)


def test_two_processes_accumulating_two_batches_take_the_steps_of_one_process_with_the_whole_batch(
        training_trees, one_process, two_processes, tmp_path):
    """The one mechanism under both (tests/test_training_step.py): 2 processes x 2 accumulated batches of 2 trees
    take the steps (losses and weights) of 1 process reading batches of 8."""
    from safetensors.torch import load_file

    one_process.run(train_args(training_trees, tmp_path / "one", batch_size=8, max_steps=2, save_steps=2))
    two_processes.run([*train_args(training_trees, tmp_path / "two", batch_size=2, max_steps=2, save_steps=2),
                       "--gradient-accumulation-steps", "2"])
    single, double = logged_losses(tmp_path / "one", 2), logged_losses(tmp_path / "two", 2)
    assert sorted(single) == sorted(double) == [1, 2]
    for step in single:
        assert double[step] == pytest.approx(single[step], rel=1e-5, abs=1e-6), (step, single, double)
    first, second = load_file(tmp_path / "one" / "model.safetensors"), load_file(tmp_path / "two" / "model.safetensors")
    for name in first:
        torch.testing.assert_close(second[name], first[name], rtol=1e-4, atol=1e-4, msg=name)


def test_two_processes_train_som_and_the_main_one_writes(two_processes, tmp_path):
    """SOM (tests/test_som_training.py): the main process locks and checks --output, trains the word vocabulary (the
    other loads it) and writes the folder; both take the same steps."""
    from conftest import write_conllu_treebank

    treebank = write_conllu_treebank(tmp_path / "conllu")
    output = tmp_path / "two"
    result = two_processes.run([
        "train", "--preset", "dsom-tiny", "--train", str(treebank / "en_mini-ud-train.conllu"), "--eval",
        str(treebank / "en_mini-ud-dev.conllu"), "--output", str(output), "--max-steps", "4", "--batch-size", "2",
        "--min-count", "1", "--logging-steps", "1", "--save-steps", "2", "--eval-steps", "2", "--warmup-steps", "1",
        *[part for setting in ("hidden_size=16", "num_slots=6", "intermediate_size=24", "parser_size=8",
                               "semantic_size=12", "syntactic_size=4") for part in ("--set", setting)]])
    assert result.stdout.count("saved the model and tokenizer") == 1
    record = json.loads((output / "training_setup.json").read_text())
    assert record["steps_done"] == 4 and record["som"]["model"] == "dSOM"
    assert not (output / ".tokenizer-for-processes").exists() and not (output / ".hf-slm.lock").exists()
    assert (output / "model.safetensors").is_file() and (output / "vocab.json").is_file()


def test_two_processes_train_a_proposal_parser_like_one(training_trees, one_process, two_processes, tmp_path):
    """`hf-slm parser train` (issue 38) under torchrun: two processes with batches of 4 take the steps of one with
    batches of 8 (the same batches, length-grouped over the global batch; a loss that is a mean over sentences), and
    the main process alone writes the folder."""
    from safetensors.torch import load_file

    def parser_args(output, batch_size):
        sizes = ["lstm_hidden_size=16", "lstm_layers=1", "word_embedding_size=8", "char_embedding_size=8",
                 "char_hidden_size=8", "span_mlp_size=8", "label_mlp_size=8", "tag_mlp_size=8", "embedding_dropout=0",
                 "lstm_dropout=0", "mlp_dropout=0"]  # dropout off: the processes draw other masks
        return ["parser", "train", "--kind", "crf", "--train", str(training_trees), "--output", str(output),
                *[part for setting in sizes for part in ("--set", setting)], "--max-steps", "4", "--batch-size",
                str(batch_size), "--logging-steps", "1", "--save-steps", "4"]

    one_process.run(parser_args(tmp_path / "one", 8))
    two = two_processes.run(parser_args(tmp_path / "two", 4))
    single, double = logged_losses(tmp_path / "one", 4), logged_losses(tmp_path / "two", 4)
    assert sorted(single) == sorted(double) == [1, 2, 3, 4]
    for step in single:
        assert double[step] == pytest.approx(single[step], rel=1e-5, abs=1e-5), (step, single, double)
    first, second = load_file(tmp_path / "one" / "model.safetensors"), load_file(tmp_path / "two" / "model.safetensors")
    for name in first:
        torch.testing.assert_close(second[name], first[name], rtol=1e-4, atol=1e-4, msg=name)
    assert two.stdout.count("saved the parser and its tokenizer") == 1, two.stdout
    assert not (tmp_path / "two" / ".hf-slm.lock").exists()


def test_the_parameters_a_configuration_leaves_unused_are_found(tmp_path):
    from conftest import save_tiny_checkpoint
    from hf_slm.data.collator import SyntacticDataCollator
    from hf_slm.training.train import tree_dataset, unused_parameter_names

    trees = (SAMPLE / "train.txt").read_text().splitlines()[:6]
    _, model, tokenizer = save_tiny_checkpoint(tmp_path / "model", trees, vocab_size=60)
    collator = SyntacticDataCollator("tg", tokenizer.action_layout)
    dataset = tree_dataset(tokenizer, trees, "tg", model.config.max_sequence_length)
    model.train()
    weights = {name: value.clone() for name, value in model.state_dict().items()}
    assert unused_parameter_names(model, collator, dataset, 4) == []
    model.unread = torch.nn.Parameter(torch.zeros(3))  # a parameter that no forward reads
    assert unused_parameter_names(model, collator, dataset, 4) == ["unread"]
    assert all(parameter.grad is None for parameter in model.parameters()), "the probe's gradients are discarded"
    for name, value in weights.items():
        assert torch.equal(model.state_dict()[name], value), name


# ---- sharded evaluation ------------------------------------------------------------------------------------
FIXTURES = Path(__file__).resolve().parent / "fixtures"
BEAM = ["--beam-size", "10", "--word-beam-size", "4", "--batch-size", "2"]


@pytest.fixture(scope="module")
def evaluated_model(tmp_path_factory):
    """A small random TG model with a tokenizer trained on 40 sample trees, and 7 gold trees to evaluate on."""
    from conftest import save_tiny_checkpoint

    directory = tmp_path_factory.mktemp("distributed_eval")
    lines = (SAMPLE / "train.txt").read_text().splitlines()
    checkpoint, _, _ = save_tiny_checkpoint(directory / "model", lines[:40], vocab_size=120)
    gold = directory / "gold.txt"
    short = [line for line in lines[40:] if line.count(" (") <= 14][:7]  # short trees: a quick beam search
    gold.write_text("\n".join(short) + "\n")
    return checkpoint, gold


EVALUATIONS = {
    # 7 sentences in chunks of 2: 4 chunks, dealt out in 2 rounds of 2 processes
    "ppl": lambda gold: ["--data", str(gold)],
    "parse": lambda gold: ["--gold", str(gold)],
    "sg": lambda gold: ["--suites", str(FIXTURES / "syntaxgym"), "--limit", "2"],
    "blimp": lambda gold: ["--data", str(FIXTURES / "blimp"), "--limit", "2"],
}


def _result_files(directory):
    """{file name: contents} of a results folder, the result records without their date; the bar chart left
    out (its pixels are matplotlib's)."""
    files = {}
    for path in sorted(Path(directory).iterdir()):
        if path.suffix == ".png":
            continue
        text = path.read_text()
        if path.suffix == ".json":
            record = json.loads(text)
            record.pop("date", None)
            text = record
        files[path.name] = text
    return files


@pytest.mark.parametrize("evaluation", sorted(EVALUATIONS))
def test_two_processes_evaluate_like_one(evaluated_model, evaluation, one_process, two_processes, tmp_path):
    checkpoint, gold = evaluated_model
    evaluate_with_one_and_two_processes(
        (one_process, two_processes), evaluation,
        ["eval", evaluation, "--model", str(checkpoint), *EVALUATIONS[evaluation](gold), *BEAM], tmp_path)


def test_two_processes_give_the_uas_of_one(one_process, two_processes, tmp_path):
    from helpers.dependency_models import tiny
    from helpers.conllu_samples import GOLD, conllu

    model, tokenizer = tiny("dtg")
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    (tmp_path / "gold.conllu").write_text(conllu(GOLD))  # 4 sentences: 2 chunks, one to each process
    evaluate_with_one_and_two_processes(
        (one_process, two_processes), "uas", ["eval", "uas", "--model", str(tmp_path / "model"), "--data", str(tmp_path / "gold.conllu"), *BEAM],
        tmp_path)


def proposal_blocks(gold_lines):
    """Per gold tree, 3 proposals over its words and POS tags: the gold tree, the flat tree and the right-branching
    one (a block of text each, blank-line separated)."""
    from nltk import Tree

    blocks = []
    for line in gold_lines:
        preterminals = [f"({tag} {word})" for word, tag in Tree.fromstring(line).pos()]
        right = preterminals[-1]
        for preterminal in reversed(preterminals[:-1]):
            right = f"(S {preterminal} {right})"
        blocks.append("\n".join([line, f"(S {' '.join(preterminals)})", right]))
    return "\n\n".join(blocks) + "\n"


def test_two_processes_rerank_like_one(evaluated_model, one_process, two_processes, tmp_path):
    checkpoint, gold = evaluated_model
    proposals = tmp_path / "proposals.txt"
    proposals.write_text(proposal_blocks(gold.read_text().splitlines()))
    # 7 sentences of 3 proposals in chunks of 6 proposals: 4 chunks, dealt out in 2 rounds of 2 processes
    evaluate_with_one_and_two_processes(
        (one_process, two_processes), "rerank", ["eval", "rerank", "--model", str(checkpoint), "--gold", str(gold), "--proposals", str(proposals),
                   "--chunk-size", "6", "--batch-size", "4"], tmp_path)


def evaluate_with_one_and_two_processes(sessions, evaluation, args, tmp_path):
    one_process, two_processes = sessions
    one = one_process.run([*args, "--output", str(tmp_path / "one")])
    two = two_processes.run([*args, "--output", str(tmp_path / "two")])

    # The main process merged the shares into the results of one process, item by item (the journal included),
    # and printed them once.
    assert _result_files(tmp_path / "two") == _result_files(tmp_path / "one")
    assert two.stdout == one.stdout and one.stdout.strip()
    assert two.stderr.count("wrote ") == 1, two.stderr
    # One progress bar, the main process's (each bar starts with one 0% line).
    assert _progress_bars(two.stderr, evaluation) == _progress_bars(one.stderr, evaluation) >= 1, two.stderr


PROGRESS_NAMES = {"ppl": "perplexity (", "parse": "parsing", "sg": "SyntaxGym", "blimp": "BLiMP", "uas": "parsing",
                  "rerank": "reranking"}


def _progress_bars(stderr, evaluation):
    return sum(1 for line in stderr.replace("\r", "\n").splitlines()
               if line.startswith(PROGRESS_NAMES[evaluation]) and " 0%|" in line)


SHARING_SCRIPT = r'''
import json, sys
from hf_slm.runs.distributed import is_main_process, rank
from hf_slm.runs.journal import journaled_chunks, map_in_chunks

def compute(chunk):
    if sys.argv[1] == "fail" and rank() == 1:
        raise ValueError("sentence 5 cannot be scored")
    # a map inside a chunk runs in the process computing the chunk (the other is not there to share it)
    return [(rank(), square) for square in map_in_chunks(lambda inner: [x * x for x in inner], chunk, 1)]

values = map_in_chunks(compute, range(7), chunk_size=2)
# chunks of other sizes (reranking's: whole sentences up to a number of proposals), none of them journaled
chunk_values = journaled_chunks(None, [["a", "b"], ["c"], ["d"]], lambda index: [(rank(), index)] * (2 - (index > 0)))
if is_main_process():
    print(json.dumps(values))
    print(json.dumps(chunk_values))
'''


def run_script(tmp_path, *args):
    script = tmp_path / "share.py"
    script.write_text(SHARING_SCRIPT)
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master-addr=127.0.0.1",
               f"--master-port={free_port()}", str(script), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_SECONDS, env=one_thread_environment())


def test_chunks_are_dealt_out_to_the_processes_in_rounds(tmp_path):
    result = run_script(tmp_path, "ok")
    assert result.returncode == 0, result.stderr[-3000:]
    values, chunk_values = map(json.loads, result.stdout.splitlines())
    # chunks [0, 1] [2, 3] [4, 5] [6]: round 1 gives the first two to processes 0 and 1, round 2 the others
    assert values == [[0, 0], [0, 1], [1, 4], [1, 9], [0, 16], [0, 25], [1, 36]]
    assert chunk_values == [[[0, 0], [0, 0]], [[1, 1]], [[0, 2]]]


def test_a_process_that_fails_stops_all_of_them_with_its_error(tmp_path):
    result = run_script(tmp_path, "fail")  # the timeout would catch a process left waiting for the other
    assert result.returncode != 0
    assert "process 1 failed computing items: ValueError: sentence 5 cannot be scored" in result.stderr


def test_two_processes_resume_an_interrupted_evaluation_from_its_journal(evaluated_model, two_processes, tmp_path):
    checkpoint, gold = evaluated_model
    args = ["eval", "ppl", "--model", str(checkpoint), *EVALUATIONS["ppl"](gold), *BEAM, "--output", str(tmp_path)]
    two_processes.run(args)
    complete = _result_files(tmp_path)
    # An interruption after the first 3 sentences: the journal keeps them, the results are not written yet.
    journal = tmp_path / "ppl-gold.journal.jsonl"
    journal.write_text("".join(journal.read_text().splitlines(keepends=True)[:4]))
    for name in complete:
        if not name.endswith(".journal.jsonl"):
            (tmp_path / name).unlink()
    resumed = two_processes.run(args)
    assert resumed.stderr.count("resuming ppl-gold.journal.jsonl: 3 of 7 sentences already finished") == 1
    # The same results; the journal differs only in holding again the sentences of the chunk cut short.
    without_journal = {name: text for name, text in complete.items() if not name.endswith(".journal.jsonl")}
    assert {name: text for name, text in _result_files(tmp_path).items()
            if not name.endswith(".journal.jsonl")} == without_journal


# ---- summarization: fine-tuning and ROUGE ------------------------------------------------------------------
@pytest.fixture(scope="module")
def summarization_data(tmp_path_factory):
    """Two XSum documents prepared as summarization sequences for a tiny random TG (test_summarization's setup):
    (base model folder, XSum data folder, prepared folder)."""
    from helpers.summarization import PARSER_ARGS, memorization_setup

    from hf_slm.cli import main

    directory = tmp_path_factory.mktemp("distributed_summarization")
    _, data, parser = memorization_setup(directory, "tg")
    # Its dropout is off (MEMORIZATION_MODEL): the processes would draw other random masks than the single process.
    assert json.loads((directory / "base" / "config.json").read_text())["core_dropout"] == 0
    prepared = directory / "prepared"
    assert main(["data", "prepare", "--loader", "xsum", "--summarization", "--parser", str(parser), "--path",
                 str(data), "--tokenizer", str(directory / "base"), "--output", str(prepared),
                 "--max-document-words", "20", *PARSER_ARGS]) == 0
    return directory / "base", data, prepared


@pytest.fixture(scope="module")
def finetuned_runs(summarization_data, one_process, two_processes, tmp_path_factory):
    """3 fine-tuning steps over the 2 prepared documents: one process with batches of 2, two with batches of 1."""
    base, _, prepared = summarization_data
    directory = tmp_path_factory.mktemp("distributed_finetuning")

    def args(output, batch_size):
        return ["finetune", "--task", "xsum", "--model", str(base), "--train", str(prepared), "--output",
                str(output), "--max-steps", "3", "--batch-size", str(batch_size), "--learning-rate", "3e-3",
                "--warmup-steps", "1", "--save-steps", "3"]

    one = one_process.run(args(directory / "one", 2))
    two = two_processes.run(args(directory / "two", 1))
    return (directory / "one", one), (directory / "two", two)


def test_two_processes_fine_tune_like_one(finetuned_runs, summarization_data):
    from safetensors.torch import load_file

    (one_dir, _), (two_dir, two) = finetuned_runs
    first, second = load_file(one_dir / "model.safetensors"), load_file(two_dir / "model.safetensors")
    base = load_file(summarization_data[0] / "model.safetensors")
    assert sorted(first) == sorted(second) == sorted(base)
    assert any(not torch.equal(first[name], base[name]) for name in base), "3 steps changed no weight"
    # The same 3 steps: each process half of each batch, the gradients averaged by DistributedDataParallel.
    # Adam moves a weight by about the learning rate whatever its gradient's size, so where a gradient is near
    # Adam's eps (some r_proj entries, ~1e-8) the summation order of the all-reduce shows (measured: 1e-4 of a
    # 4.5e-3 move; 1e-6 elsewhere). A wrong half or weighting flips update signs: a step's 2 x 1.5e-3, far
    # beyond a tenth of the whole move, which is the bound.
    moved = max((first[name] - base[name]).abs().max().item() for name in base)
    for name in first:
        torch.testing.assert_close(second[name], first[name], rtol=0, atol=moved / 10, msg=name)
    # Written once, by the main process: the record (with its fine-tuning entry), the card and the message.
    record = json.loads((two_dir / "training_setup.json").read_text())
    assert record["steps_done"] == 3 and record["fine_tuning"]["task"] == "xsum"
    assert "fine-tuned" in (two_dir / "README.md").read_text()
    assert two.stdout.count("saved the fine-tuned model") == 1, two.stdout
    assert two.stdout.count("fine-tuning ") == 1, two.stdout
    assert not (two_dir / ".hf-slm.lock").exists()


def test_two_processes_give_the_rouge_of_one(finetuned_runs, summarization_data, one_process, two_processes,
                                            tmp_path):
    (_, _), (model, _) = finetuned_runs
    _, data, _ = summarization_data
    # --batch-size 1: the 2 documents are 2 chunks, one generated by each process.
    args = ["eval", "rouge", "--model", str(model), "--data", str(data), "--split", "train", "--batch-size", "1",
            "--max-new-words", "4"]
    one = one_process.run([*args, "--output", str(tmp_path / "one")])
    two = two_processes.run([*args, "--output", str(tmp_path / "two")])
    files = _result_files(tmp_path / "one")
    assert "rouge-xsum-train.generated.journal.jsonl" in files and "rouge-xsum-train_documents.jsonl" in files
    assert _result_files(tmp_path / "two") == files
    assert two.stdout == one.stdout and one.stdout.count("ROUGE F-measure") == 1
    assert two.stderr.count("wrote ") == 1, two.stderr


def test_the_silver_cache_is_refused_under_two_processes(finetuned_runs, summarization_data, two_processes, tmp_path):
    (_, _), (model, _) = finetuned_runs
    _, data, _ = summarization_data
    result = two_processes.run(["eval", "rouge", "--model", str(model), "--data", str(data), "--split", "train",
                                "--cache", str(tmp_path / "cache"), "--output", str(tmp_path / "results")], check=False)
    assert result.returncode != 0
    assert f"--cache {tmp_path / 'cache'}: the silver-tree cache is written by one process" in result.stderr
    assert not (tmp_path / "results").exists()
