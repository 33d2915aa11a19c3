"""Checkpoints load through the Auto classes, with hf_slm installed and in an interpreter without it."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from hf_slm import SyntacticDataCollator, SyntacticTokenizer, joint_log_probs

from conftest import ISOLATION_PREAMBLE, save_tiny_checkpoint

TREES = [
    "(ROOT (S (NP (DT the) (JJ blue) (NN bird)) (VP (VBZ sings)) (. .)))",
    "(ROOT (S (NP (DT a) (NN dog)) (VP (VBZ barks) (PP (IN at) (NP (DT the) (NN moon))))))",
    "(ROOT (NP (NP (DT the) (NN end)) (PP (IN of) (NP (PRP it)))))",
]

# Runs in a fresh interpreter without hf_slm and nltk (see conftest.ISOLATION_PREAMBLE): the README's
# canonical snippet, model(**tokenizer(trees, return_tensors="pt", padding=True), labels=input_ids), on each
# checkpoint given (one interpreter for all: its imports are most of its time).
CHILD = ISOLATION_PREAMBLE + r'''
import json, sys, torch
from transformers import AutoModel, AutoModelForCausalLM, AutoTokenizer

inputs_path, output_path, checkpoints = sys.argv[1], sys.argv[-1], sys.argv[2:-1]
trees = torch.load(inputs_path)["trees"]
found = {}
for checkpoint in checkpoints:
    model = AutoModelForCausalLM.from_pretrained(checkpoint, trust_remote_code=True).eval()
    base = AutoModel.from_pretrained(checkpoint, trust_remote_code=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(checkpoint, trust_remote_code=True)
    inputs = tokenizer(trees, return_tensors="pt", padding=True)
    with torch.no_grad():
        output = model(**inputs, labels=inputs["input_ids"])
        hidden = base(**inputs).last_hidden_state
        # log p(x, y) of each tree: the sum of the shifted log-probs of its actions
        log_probs = torch.log_softmax(output.logits[:, :-1], -1).gather(-1, inputs["input_ids"][:, 1:, None])[..., 0]
        joint = (log_probs * inputs["attention_mask"][:, 1:]).sum(-1)
    found[checkpoint] = {
        "loss": output.loss, "logits": output.logits, "hidden": hidden, "joint": joint,
        "input_ids": inputs["input_ids"], "attention_mask": inputs["attention_mask"],
        "decoded": [tokenizer.decode(ids, skip_special_tokens=False) for ids in tokenizer(trees)["input_ids"]],
        "classes": [type(model).__name__, type(model).__module__, type(base).__module__, type(tokenizer).__module__],
    }
torch.save(found, output_path)
'''

GRAMMARS = {  # grammar -> (linearization, family class name)
    "tg": ("top_down", "TransformerGrammar"),
    "choe_charniak": ("top_down", "TransformerXL"),
    "terminals": ("terminals", "TransformerXL"),
}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """{grammar: (folder, model, tokenizer)}, one small random checkpoint per grammar of GRAMMARS."""
    made = {}
    for grammar in sorted(GRAMMARS):
        directory = tmp_path_factory.mktemp(f"checkpoint-{grammar}")
        made[grammar] = save_tiny_checkpoint(directory, TREES, vocab_size=40, grammar=grammar,
                                             linearization=GRAMMARS[grammar][0], hidden_size=32,
                                             num_attention_heads=4, intermediate_size=64)
    return made


@pytest.fixture(params=sorted(GRAMMARS))
def checkpoint(request, checkpoints):
    return checkpoints[request.param]


@pytest.fixture(scope="module")
def without_hf_slm(checkpoints, tmp_path_factory):
    """{folder: what CHILD found} for every checkpoint, from one interpreter without hf_slm."""
    directory = tmp_path_factory.mktemp("without_hf_slm")
    torch.save({"trees": TREES}, directory / "inputs.pt")
    script = directory / "child.py"
    script.write_text(textwrap.dedent(CHILD))
    env = dict(os.environ, HF_HOME=str(directory / "hf_home"), PYTHONPATH="", PYTHONNOUSERSITE="1")
    folders = [str(folder) for folder, _, _ in checkpoints.values()]
    result = subprocess.run([sys.executable, str(script), str(directory / "inputs.pt"), *folders,
                             str(directory / "out.pt")], cwd=directory, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return torch.load(directory / "out.pt")


def test_checkpoint_files_and_auto_map(checkpoint):
    directory, model, _ = checkpoint
    family = GRAMMARS[model.config.grammar][1]
    files = set(os.listdir(directory))
    # the shared hub files, and the family's own (paper 000's families: transformer_grammar_*.py)
    assert {"model.safetensors", "config.json", "modeling_slm.py", "configuration_slm.py", "backbone.py", "grammars.py",
            "generation_slm.py", "search_constraints.py", "safe_loading.py", "tokenization_slm.py", "trees.py",
            "linearizers.py", "tree_type.py", "transformer_grammar_model.py", "transformer_grammar_config.py",
            "transformer_grammars.py", "preset_settings.py"} <= files
    assert not any(name.endswith((".bin", ".pt", ".pth")) for name in files)
    auto_map = json.loads((directory / "config.json").read_text())["auto_map"]
    assert auto_map == {
        "AutoConfig": f"transformer_grammar_config.{family}Config",
        "AutoModel": f"transformer_grammar_model.{family}Model",
        "AutoModelForCausalLM": f"transformer_grammar_model.{family}ForCausalLM",
    }
    tokenizer_map = json.loads((directory / "tokenizer_config.json").read_text())["auto_map"]
    assert tokenizer_map["AutoTokenizer"][0] == "tokenization_slm.SyntacticTokenizer"


def test_auto_classes_with_hf_slm_installed(checkpoint):
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoTokenizer

    directory, model, tokenizer = checkpoint
    family = GRAMMARS[model.config.grammar][1]
    assert type(AutoConfig.from_pretrained(directory)).__name__ == f"{family}Config"
    loaded = AutoModelForCausalLM.from_pretrained(directory).eval()
    assert type(loaded).__name__ == f"{family}ForCausalLM"
    assert type(AutoModel.from_pretrained(directory)).__name__ == f"{family}Model"
    assert AutoTokenizer.from_pretrained(directory)(TREES)["input_ids"] == tokenizer(TREES)["input_ids"]
    batch = SyntacticDataCollator.from_tokenizer(tokenizer, grammar=model.config.grammar)(tokenizer(TREES)["input_ids"])
    with torch.no_grad():
        assert torch.equal(loaded(**batch).logits, model(**batch).logits)


def test_hf_contract_in_an_interpreter_without_hf_slm(checkpoint, without_hf_slm):
    """model(**tokenizer(trees, padding=True), labels=input_ids) through trust_remote_code equals hf-slm's
    collator path (the loss) and joint_log_probs (log p(x, y) per tree)."""
    directory, model, tokenizer = checkpoint
    out = without_hf_slm[str(directory)]
    assert out["classes"][0] == f"{GRAMMARS[model.config.grammar][1]}ForCausalLM"
    assert all(module.startswith("transformers_modules") for module in out["classes"][1:]), out["classes"]
    ids = tokenizer(TREES)["input_ids"]
    batch = SyntacticDataCollator.from_tokenizer(tokenizer, grammar=model.config.grammar)(ids)
    with torch.no_grad():
        expected = model(**batch)
        hidden = model.model(**{k: v for k, v in batch.items() if k != "labels"}).last_hidden_state
    real = out["attention_mask"].bool()
    assert torch.equal(out["input_ids"][real], batch["input_ids"][batch["attention_mask"].bool()])
    assert out["loss"].item() == pytest.approx(expected.loss.item(), rel=1e-5)
    assert torch.allclose(out["logits"][real], expected.logits[real], atol=1e-5)
    assert torch.allclose(out["hidden"][real], hidden[real], atol=1e-5)
    assert out["joint"].tolist() == pytest.approx(joint_log_probs(model, ids), abs=1e-4)
    assert out["decoded"] == [tokenizer.decode(i, skip_special_tokens=False) for i in ids]


def test_broken_checkpoints_give_clear_errors(checkpoint, tmp_path):
    from transformers import AutoModelForCausalLM

    directory, _, _ = checkpoint
    with pytest.raises((OSError, ValueError)):
        AutoModelForCausalLM.from_pretrained(tmp_path / "missing")
    broken = tmp_path / "broken"
    broken.mkdir()
    for name in os.listdir(directory):
        (broken / name).write_bytes((directory / name).read_bytes())
    (broken / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(Exception, match="(?i)safetensors|header|deserializ"):
        AutoModelForCausalLM.from_pretrained(broken)


def test_tokenizer_that_does_not_match_the_model_is_refused(tmp_path):
    from hf_slm import check_tokenizer_matches

    _, model, tokenizer = save_tiny_checkpoint(tmp_path, TREES, vocab_size=40, grammar="tg")
    check_tokenizer_matches(model.config, tokenizer)
    other = SyntacticTokenizer.train(TREES + ["(ROOT (FRAG (UH oh)))"], vocab_size=40)  # one more label
    with pytest.raises(ValueError, match="open_nt_stop is .* in the tokenizer but .* in the model config"):
        check_tokenizer_matches(model.config, other)
    words = SyntacticTokenizer.train(TREES, vocab_size=40, linearization="terminals")
    with pytest.raises(ValueError, match="linearizes 'terminals' but the tg grammar reads 'top_down'"):
        check_tokenizer_matches(model.config, words)


OUTSIDE_FAMILY = '''
try:  # inside a checkpoint: hf-slm's hub files lie beside this one
    from .configuration_slm import SyntacticTransformerConfig
    from .span_crf import log_partition  # noqa: F401  (a hub module that no base class's file imports)
except ImportError:  # with hf-slm installed
    from hf_slm.modeling.configuration_slm import SyntacticTransformerConfig


class OutsideConfig(SyntacticTransformerConfig):
    model_type = "outside_family_test"
'''


def test_an_outside_familys_relative_imports_of_hf_slm_hub_modules_are_copied(tmp_path):
    """Issue 40: a family in its own folder imports hf-slm hub modules relatively (beside it in a checkpoint);
    transformers asks for every one of them at load, so each is copied, with what it imports, not only the files of
    its base classes."""
    import importlib.util

    from hf_slm.modeling.hub_code import hub_code_files

    (tmp_path / "outside_family.py").write_text(OUTSIDE_FAMILY)
    spec = importlib.util.spec_from_file_location("outside_family", tmp_path / "outside_family.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["outside_family"] = module
    try:
        spec.loader.exec_module(module)
        names = [path.name for path in hub_code_files([module.OutsideConfig])]
    finally:
        del sys.modules["outside_family"]
    assert names[0] == "outside_family.py" and "configuration_slm.py" in names
    assert "span_crf.py" in names and "crf_semirings.py" in names  # and what span_crf.py imports
    assert len(names) == len(set(names))
