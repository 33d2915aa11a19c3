"""Class 3 of issue 12: an ordinary mistake is one line naming the input and what was expected, with no
traceback: a model folder that is missing, incomplete, cut short or of another kind, a hub that cannot be
reached, a compressed or binary file given as text, a bad --set. (The boundary: hf_slm/cli/errors.py; model
folders: hf_slm/checkpoints/loading.py; text files: hf_slm/data/text_files.py. --debug, Ctrl-C and an unreachable
HF_ENDPOINT are in test_cli_errors.py.)"""

import gzip
import json
import shutil

import hf_slm

from mistake_cases import CliCase

GUM_SAMPLE = hf_slm.__file__.replace("__init__.py", "sample_data/gum/train.txt")
SENTENCE = "the blue bird sings ."
TOKENIZER_FILES = ("spiece.model", "tokenizer_config.json", "tokenization_slm.py", "trees.py", "linearizers.py",
                   "tree_type.py")


def _parse(model):
    return ["parse", "--model", model, SENTENCE]


def _copy(tmp, model):
    """A copy of the checkpoint to damage: {tmp}/m."""
    shutil.copytree(model, tmp / "m")
    return tmp / "m"


def _damaged(change):
    """prepare(): copy the checkpoint to {tmp}/m, then change(folder)."""
    return lambda tmp, model: change(_copy(tmp, model))


def _cut(file, keep):
    """Keep the first `keep` bytes of `file` (a negative `keep`: drop that many from the end)."""
    data = file.read_bytes()
    file.write_bytes(data[:keep])


def _set_json(file, **fields):
    file.write_text(json.dumps({**json.loads(file.read_text()), **fields}))


def _tokenizer_only(tmp, model):
    (tmp / "tok").mkdir()
    for name in TOKENIZER_FILES:
        shutil.copy(model / name, tmp / "tok" / name)


def _trainer_output(tmp, model):
    for step in (5, 40, 200):  # a run stopped before its final save: checkpoints only
        (tmp / "run" / f"checkpoint-{step}").mkdir(parents=True)


def _write(name, data):
    def prepare(tmp, model):
        (tmp / name).write_bytes(data)
    return prepare


def _ppl(data):
    return ["eval", "ppl", "--model", "{model}", "--output", "{tmp}/out", "--data", data]


def _train(*arguments):
    return ["train", "--preset", "tg-ptb", "--output", "{tmp}/run", "--max-steps", "1", *arguments]


def _no_model_written(result, tmp):
    assert not (tmp / "run" / "config.json").exists()


GZIPPED = gzip.compress(f"{SENTENCE}\n".encode())
LATIN_1 = f"the cafe\n{SENTENCE}\nthe caf\u00e9 sings .\n".encode("latin-1")  # the bad byte: offset 38

CASES = [
    # ---- --model: folders and hub ids ----
    CliCase("parse --model a folder that does not exist", _parse("{tmp}/no-such-model"),
            message=r"model folder \S*no-such-model does not exist$"),
    CliCase("parse --model a folder without config.json", _parse("{tmp}/m"),
            message=r"model folder \S*/m has no config\.json; expected a checkpoint saved with save_pretrained$",
            prepare=_damaged(lambda folder: (folder / "config.json").unlink())),
    CliCase("parse --model a folder holding only a tokenizer", _parse("{tmp}/tok"), prepare=_tokenizer_only,
            message=r"model folder \S*/tok has no config\.json.*it holds only a tokenizer"),
    CliCase("parse --model the output folder of an unfinished training run", _parse("{tmp}/run"),
            prepare=_trainer_output, message=r"\S*/run has no config\.json.*did you mean \S*/run/checkpoint-200\?"),
    CliCase("parse --model a file, not a folder", _parse("{model}/config.json"),
            message=r"model path \S*config\.json is a file; expected a checkpoint folder"),
    CliCase("parse --model with config.json cut short", _parse("{tmp}/m"),
            prepare=_damaged(lambda folder: _cut(folder / "config.json", 200)),
            message=r"\S*/m/config\.json is not valid JSON \(line \d+ col \d+: .*\): the file may be cut short"),
    CliCase("parse --model with config.json holding a list", _parse("{tmp}/m"),
            prepare=_damaged(lambda folder: (folder / "config.json").write_text("[]")),
            message=r"\S*/m/config\.json holds a JSON list; expected an object"),
    CliCase("parse --model with tokenizer_config.json cut short", _parse("{tmp}/m"),
            prepare=_damaged(lambda folder: _cut(folder / "tokenizer_config.json", 100)),
            message=r"\S*/m/tokenizer_config\.json is not valid JSON .*cut short"),
    CliCase("parse --model a folder holding another kind of model", _parse("{tmp}/m"),
            prepare=_damaged(lambda folder: _set_json(folder / "config.json", model_type="gpt2")),
            message=r"\S*/m/config\.json describes a model of type 'gpt2'; expected an hf-slm model "
                    r"\(compositional_slm or dependency_transformer_grammar or dependency_transformer_xl or rnng or "
                    r"slm_transformer_xl or syntactic_ordered_memory or transformer_grammar\)"),
    CliCase("parse --model with model.safetensors cut in its header", _parse("{tmp}/m"),
            prepare=_damaged(lambda folder: _cut(folder / "model.safetensors", 300)),
            message=r"\S*/m/model\.safetensors cannot be read: .*header.*\(truncated, or not a safetensors file\?\)"),
    CliCase("parse --model with model.safetensors cut in its tensors", _parse("{tmp}/m"),
            prepare=_damaged(lambda folder: _cut(folder / "model.safetensors", -100)),
            message=r"\S*/m/model\.safetensors cannot be read: .*\(truncated, or not a safetensors file\?\)"),
    CliCase("parse --model without a tokenizer", _parse("{tmp}/m"),
            prepare=_damaged(lambda folder: (folder / "tokenizer_config.json").unlink()),
            message=r"model folder \S*/m has no tokenizer \(tokenizer_config\.json\)"),
    CliCase("score --model a hub id while the hub is offline", ["score", "--model", "someone/some-model", SENTENCE],
            message=r"cannot reach the hub for 'someone/some-model': HF_HUB_OFFLINE is set and the hub cache holds "
                    r"no copy of it; there is no local folder 'someone/some-model' either"),
    CliCase("eval ppl --model a misspelled folder name", ["eval", "ppl", "--model", "modle", "--data", GUM_SAMPLE],
            message=r"cannot reach the hub for 'modle'.*no local folder 'modle'"),

    # ---- text files that are not text ----
    CliCase("eval ppl --data a gzip file", _ppl("{tmp}/sentences.txt.gz"), prepare=_write("sentences.txt.gz", GZIPPED),
            message=r"^hf-slm eval ppl: error: data file \S*sentences\.txt\.gz is gzip-compressed; decompress it "
                    "first$"),
    CliCase("eval ppl --data a weight file", _ppl("{model}/model.safetensors"),
            message=r"data file \S*model\.safetensors is a binary file \(a NUL byte at offset \d+\), not text$"),
    CliCase("eval ppl --data a Latin-1 file", _ppl("{tmp}/latin1.txt"), prepare=_write("latin1.txt", LATIN_1),
            message=r"data file \S*latin1\.txt is not UTF-8 text \(byte 0xe9 at offset 38\)"),
    CliCase("eval ppl --data a folder", _ppl("{tmp}"), message=r"data file \S+ is a directory, not a file$"),
    CliCase("eval ppl --data a file that does not exist", _ppl("{tmp}/missing.txt"),
            message=r"data file \S*missing\.txt does not exist$"),
    CliCase("eval ppl --proposals a gzip file", _ppl(GUM_SAMPLE) + ["--proposals", "{tmp}/proposals.gz"],
            prepare=_write("proposals.gz", GZIPPED), message=r"proposal file \S*proposals\.gz is gzip-compressed"),
    CliCase("eval blimp --data a gzip file", ["eval", "blimp", "--model", "{model}", "--output", "{tmp}/out", "--data",
                                               "{tmp}/anaphor.jsonl.gz"], prepare=_write("anaphor.jsonl.gz", GZIPPED),
            message=r"BLiMP file \S*anaphor\.jsonl\.gz is gzip-compressed; decompress it first"),
    CliCase("eval rerank --gold a gzip file", ["eval", "rerank", "--model", "{model}", "--output", "{tmp}/out",
                                               "--gold", "{tmp}/gold.mrg.gz", "--proposals", "{tmp}/gold.mrg.gz"],
            prepare=_write("gold.mrg.gz", GZIPPED), message=r"tree file '\S*gold\.mrg\.gz' is gzip-compressed"),
    CliCase("train --train a gzip file", _train("--train", "{tmp}/trees.gz"), prepare=_write("trees.gz", GZIPPED),
            message=r"tree file '\S*trees\.gz' is gzip-compressed; decompress it first", check=_no_model_written),
    CliCase("train --train a weight file", _train("--train", "{model}/model.safetensors"),
            message=r"tree file '\S*model\.safetensors' is not UTF-8 text \(byte 0x[0-9a-f]{2} at offset \d+\); "
                    "expected PTB brackets", check=_no_model_written),

    # ---- --set ----
    CliCase("train --set hidden_size=abc", _train("--train", GUM_SAMPLE, "--set", "hidden_size=abc"),
            message=r"config field hidden_size='abc': expected int", check=_no_model_written),
    CliCase("train --set hidden_size=1.5x (not JSON)", _train("--train", GUM_SAMPLE, "--set", "hidden_size=1.5x"),
            message=r"config field hidden_size='1\.5x': expected int", check=_no_model_written),
    CliCase("train --set without =", _train("--train", GUM_SAMPLE, "--set", "hidden_size"),
            message=r"--set 'hidden_size': expected KEY=VALUE", check=_no_model_written),
    CliCase("train --set without a key", _train("--train", GUM_SAMPLE, "--set", "=128"),
            message=r"--set '=128': expected KEY=VALUE", check=_no_model_written),
]
