"""`hf-slm masks`: the JSON report of paper 000 Figure 2, PTB input, the PNG, errors. A quick start (no torch,
transformers or datasets for --help and masks); `score` JSON lines whose surprisals add up; units in outputs."""

import json
import math
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
from conftest import save_tiny_checkpoint

from hf_slm.cli import main

FIGURE_2 = "(S (NP the blue bird NP) (VP sings VP) S)"
TREES = [
    "(ROOT (S (NP (DT the) (JJ blue) (NN bird)) (VP (VBZ sings)) (. .)))",
    "(ROOT (S (NP (DT a) (NN dog)) (VP (VBZ barks) (PP (IN at) (NP (DT the) (NN moon))))))",
    "(ROOT (S (NP (PRP I)) (VP (VBP like) (NP (PRP it))) (. .)))",
]
SMALL_BEAM = ["--beam-size", "20", "--word-beam-size", "5"]


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "hf_slm.cli", *args], capture_output=True, text=True)


def test_masks_json_figure_2():
    result = run_cli("masks", FIGURE_2, "--grammar", "tg", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert set(report) == {"tokens", "kinds", "attention_mask", "relative_positions", "labels"}
    assert report["tokens"] == "<s> (S (NP the blue bird NP) NP) (VP sings VP) VP) S) S)".split()
    assert report["kinds"][:3] == ["bos", "open_nt", "open_nt"]
    assert report["kinds"][6:8] == ["close_compose", "close_stack"]
    assert report["labels"] == ["(S", "(NP", "the", "blue", "bird", "NP)", None, "(VP", "sings", "VP)", None, "S)", None, None]
    assert report["attention_mask"][9] == [1, 1, 0, 0, 0, 0, 1, 0, 1, 1, 0, 0, 0, 0]
    assert report["relative_positions"][12] == [0, 0, 0, 0, 0, 0, -1, 0, 0, 0, -1, 0, 0, 0]


def test_masks_accepts_ptb_brackets(capsys):
    assert main(["masks", "(ROOT (S (NP (DT the) (JJ blue) (NN bird)) (VP (VBZ sings))))", "--json"]) == 0
    from_ptb = json.loads(capsys.readouterr().out)
    assert main(["masks", FIGURE_2, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == from_ptb


def test_masks_other_grammars(capsys):
    assert main(["masks", FIGURE_2, "--grammar", "terminals", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["tokens"] == ["<s>", "the", "blue", "bird", "sings", "</s>"]
    assert main(["masks", FIGURE_2, "--grammar", "choe_charniak", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert len(report["tokens"]) == 11 and report["attention_mask"][10] == [1] * 11


def test_masks_png(tmp_path):
    path = tmp_path / "mask.png"
    result = run_cli("masks", FIGURE_2, "--png", str(path))
    assert result.returncode == 0, result.stderr
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "close_compose" in result.stdout  # the text table is printed too


@pytest.mark.parametrize(
    "tree, message",
    [
        ("(S (NP the bird", "unbalanced brackets"),
        ("()", "empty tree"),
        ("(S (NP) (VP x))", "empty constituent"),
    ],
)
def test_masks_errors(tree, message, capsys):
    assert main(["masks", tree]) == 2
    assert message in capsys.readouterr().err


# ---- start-up: commands import only what they need ------------------------------------------------------

HEAVY = ("torch", "transformers", "datasets")

# Runs in a fresh interpreter, so that nothing the test session imported counts.
LAZINESS_CHILD = textwrap.dedent(f"""
    import json, sys
    import hf_slm.cli

    heavy = {HEAVY!r}
    seen = {{}}
    hf_slm.cli.commands.build_parser()
    seen["build_parser"] = [name for name in heavy if name in sys.modules]
    assert hf_slm.cli.main(["masks", {FIGURE_2!r}, "--grammar", "tg", "--json"]) == 0
    seen["masks"] = [name for name in heavy if name in sys.modules]
    print(json.dumps(seen))
""")


def test_help_and_masks_import_no_torch_transformers_or_datasets():
    # Not a timing: which modules are loaded decides the start-up time (seconds for these three).
    result = subprocess.run([sys.executable, "-c", LAZINESS_CHILD], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.splitlines()[-1])
    assert seen == {"build_parser": [], "masks": []}


def test_python_m_hf_slm_cli_exits_with_the_command_status():
    """`python -m hf_slm.cli` (how torchrun and accelerate launch run it) ends a refused command with status 2."""
    result = subprocess.run([sys.executable, "-m", "hf_slm.cli", "masks", "(S (NP the"], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert "hf-slm masks: error:" in result.stderr


def test_quickstart_finds_the_shipped_sample():
    """quickstart (hf_slm/cli/quickstart.py) trains on the GUM sample that lies at the top of the package."""
    from hf_slm.cli.quickstart import SAMPLE

    assert (SAMPLE / "train.txt").is_file()


def test_help_lists_every_command():
    result = run_cli("--help")
    assert result.returncode == 0, result.stderr
    for command in ("masks", "quickstart", "presets", "train", "parse", "score", "generate", "eval", "card", "data",
                    "push"):
        assert command in result.stdout


# ---- score: JSON lines that add up, with their units ------------------------------------------------------


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    directory, _, _ = save_tiny_checkpoint(tmp_path_factory.mktemp("cli") / "tg", TREES, vocab_size=40)
    return directory


def _score_lines(capsys, checkpoint, *options):
    sentences = ["the blue bird sings .", "I like it"]
    assert main(["score", "--model", str(checkpoint), *SMALL_BEAM, *options, *sentences]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["words"] for line in lines] == [s.split() for s in sentences]
    return lines


def test_score_lines_carry_end_surprisal_and_units_and_add_up(checkpoint, capsys):
    nats = _score_lines(capsys, checkpoint)
    bits = _score_lines(capsys, checkpoint, "--bits")
    for line in nats + bits:
        assert set(line) == {"words", "surprisals", "end_surprisal", "log_prob", "tree", "units"}
        assert len(line["surprisals"]) == len(line["words"])
        # The README's promise, checkable from the output alone: surprisals + end_surprisal = -log p(x).
        assert math.fsum(line["surprisals"]) + line["end_surprisal"] == pytest.approx(-line["log_prob"], abs=1e-6)
    assert {line["units"] for line in nats} == {"nats"} and {line["units"] for line in bits} == {"bits"}
    for in_nats, in_bits in zip(nats, bits):
        assert in_bits["log_prob"] == pytest.approx(in_nats["log_prob"] / math.log(2), rel=1e-6)
        assert in_bits["end_surprisal"] == pytest.approx(in_nats["end_surprisal"] / math.log(2), rel=1e-6, abs=1e-9)
        assert in_bits["tree"] == in_nats["tree"]


def test_eval_outputs_name_their_units(checkpoint, tmp_path, capsys):
    fixtures = Path(__file__).parent / "fixtures"
    gold = tmp_path / "gold.mrg"
    gold.write_text("\n".join(TREES[:2]) + "\n")
    out = ["--output", str(tmp_path / "results"), *SMALL_BEAM]

    assert main(["eval", "ppl", "--model", str(checkpoint), "--data", str(gold), *out]) == 0
    assert "nats" in capsys.readouterr().out
    record = json.loads((tmp_path / "results" / "ppl-gold.json").read_text())["metrics"]
    assert record["log_prob_units"] == "nats" and record["estimate"] == "upper bound"
    lines = (tmp_path / "results" / "ppl-gold_sentences.jsonl").read_text().splitlines()
    assert {json.loads(line)["units"] for line in lines} == {"nats"}

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tiny tokenizer spells some BLiMP characters as <unk>
        assert main(["eval", "blimp", "--model", str(checkpoint), "--data", str(fixtures / "blimp"), "--limit", "1",
                     *out]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["units"] == "fraction" and 0 <= printed["accuracy"] <= 1
    pairs = (tmp_path / "results" / "blimp-blimp-limit1_pairs.jsonl").read_text().splitlines()
    assert {json.loads(line)["units"] for line in pairs} == {"nats"}

    assert main(["eval", "parse", "--model", str(checkpoint), "--gold", str(gold), *out]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["units"] == "percent" and 0 <= printed["f1"] <= 100


def test_blimps_limit_says_it_counts_pairs_per_paradigm():
    """Issue 39: `eval blimp --limit 40` scored 40 pairs of each paradigm while its help said "the first N items"."""
    from hf_slm.cli.commands import build_parser

    blimp = dict(dict(build_parser()._subparsers._group_actions[0].choices)["eval"]._subparsers._group_actions[0]
                 .choices)["blimp"]
    limit = next(action for action in blimp._actions if "--limit" in action.option_strings)
    assert "of each paradigm" in limit.help


@pytest.mark.parametrize("argv", [["eval", "sg", "--model", "m", "--suites", ""],
                                  ["eval", "ppl", "--model", "m", "--model", "", "--data", "d.txt"],
                                  ["data", "prepare", "--loader", "conllu", "--path", "", "--output", "o"]])
def test_an_empty_path_from_a_failed_fetch_is_refused_at_once(argv, capsys):
    """Issue 39: `--suites "$(hf-slm data fetch syntaxgym)"` offline gave the fetch's clear error, then the command ran
    on an empty path and failed again, confusingly (`CoNLL-U folder '.': no file ending in .conllu`)."""
    from hf_slm.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    error = capsys.readouterr().err
    option = next(word for word, value in zip(argv, argv[1:]) if value == "")
    assert f"argument {option}: an empty value" in error and "hf-slm data fetch" in error
