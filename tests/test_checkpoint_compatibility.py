"""Checkpoints saved before each family's classes moved into the family's own hub files (commit ab114d2, whose
auto_map names configuration_slm.py and modeling_slm.py) still load: with hf_slm installed the Auto classes are
registered by model_type, and the numbers are those the old code gave. Saving such a checkpoint again names the
files its classes are in now, so that it loads without hf_slm too.

The fixtures keep the old configs and the old code's numbers, not weights (the repository holds none): the
weights were the old code's seeded initialization (torch.manual_seed(0)), which today's classes draw bit for bit
the same from the same config, so each test writes them beside a copy of the old config."""

import json
import shutil
from pathlib import Path

import pytest
import torch
from conftest import ISOLATION_PREAMBLE, run_without_hf_slm

OLD = Path(__file__).parent / "fixtures" / "checkpoints_ab114d2"
EXPECTED = json.loads((OLD / "expected.json").read_text())


def old_checkpoint(grammar, folder):
    """A copy of the old config of `grammar` in `folder`, with the weights the old code saved (its seeded
    initialization, drawn again) and no hub code, as the old checkpoint was."""
    from transformers import AutoConfig, AutoModelForCausalLM

    import hf_slm  # noqa: F401  (registers the Auto classes)

    folder.mkdir(parents=True)
    shutil.copy(OLD / grammar / "config.json", folder / "config.json")
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(folder))
    model.save_pretrained(folder / "drawn")
    shutil.copy(folder / "drawn" / "model.safetensors", folder / "model.safetensors")
    shutil.rmtree(folder / "drawn")
    return folder


def _model_inputs(grammar):
    """The example's ids (and, for a grammar whose model reads them, its constituent starts)."""
    from hf_slm.families import grammar_class

    expected = EXPECTED[grammar]
    inputs = {"input_ids": torch.tensor([expected["input_ids"]])}
    for name in grammar_class(grammar).action_inputs:
        inputs[name] = torch.tensor([expected[name]])
    return inputs


@pytest.mark.parametrize("grammar", sorted(EXPECTED))
def test_a_checkpoint_saved_before_the_split_loads_with_hf_slm(grammar, tmp_path):
    from transformers import AutoConfig, AutoModelForCausalLM

    import hf_slm  # noqa: F401  (registers the Auto classes)

    directory = old_checkpoint(grammar, tmp_path / grammar)
    old_map = json.loads((directory / "config.json").read_text())["auto_map"]
    assert old_map["AutoConfig"].startswith("configuration_slm.")  # what the fixture is about
    expected = EXPECTED[grammar]
    model = AutoModelForCausalLM.from_pretrained(directory).eval()
    assert type(model).__name__ == expected["model_class"]
    assert type(model).__module__.startswith("hf_slm.modeling.")  # the installed classes, not remote code
    # The loaded config names the files its classes are in now (a save copies those).
    assert model.config.auto_map == type(AutoConfig.from_pretrained(directory)).auto_classes
    with torch.no_grad():
        output = model(**_model_inputs(grammar), labels=torch.tensor([expected["input_ids"]]))
    assert torch.allclose(output.logits[0], torch.tensor(expected["logits"]), rtol=1e-5, atol=1e-5)
    assert output.loss.item() == pytest.approx(expected["loss"], rel=1e-6)


def test_an_old_checkpoint_saved_again_loads_without_hf_slm(tmp_path):
    """Loaded with hf_slm and saved again, an old checkpoint carries the current hub files and an auto_map that names
    them: an interpreter without hf_slm reads the same logits."""
    from transformers import AutoModelForCausalLM

    import hf_slm  # noqa: F401

    grammar = "nb-up-in-m"  # a family with hooks, an action input and outputs of its own
    model = AutoModelForCausalLM.from_pretrained(old_checkpoint(grammar, tmp_path / "old")).eval()
    saved = tmp_path / "saved"
    model.save_pretrained(saved)
    auto_map = json.loads((saved / "config.json").read_text())["auto_map"]
    assert auto_map == {"AutoConfig": "compositional_config.CompositionalSLMConfig",
                        "AutoModel": "compositional_model.CompositionalSLMModel",
                        "AutoModelForCausalLM": "compositional_model.CompositionalSLMForCausalLM"}
    assert {f"{name.split('.')[0]}.py" for name in auto_map.values()} <= {path.name for path in saved.iterdir()}
    inputs = _model_inputs(grammar)
    with torch.no_grad():
        expected = model(**inputs).logits
    script = ISOLATION_PREAMBLE + r'''
import sys, torch
from transformers import AutoModelForCausalLM

checkpoint, inputs_path, output_path = sys.argv[1:4]
model = AutoModelForCausalLM.from_pretrained(checkpoint, trust_remote_code=True).eval()
with torch.no_grad():
    logits = model(**torch.load(inputs_path)).logits
torch.save({"logits": logits, "module": type(model).__module__}, output_path)
'''
    torch.save(inputs, tmp_path / "inputs.pt")
    out = run_without_hf_slm(script, [saved, tmp_path / "inputs.pt"], tmp_path)
    assert out["module"].startswith("transformers_modules")
    assert torch.equal(out["logits"], expected)
