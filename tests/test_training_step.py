"""The training step (issue 18, part 4): nothing read back from the device inside the model's forward and backward,
and gradient accumulation that averages over the actions of the whole step.

- One training forward + backward of every family, on the collator's batch, with every way of reading a tensor's
  values on the host watched (item, int, bool, float, index, tolist, numpy, cpu, tensors made from host data,
  and the operators whose output size is data: nonzero, boolean indexing, masked_select, unique,
  repeat_interleave; helpers/host_reads.py, the conftest fixture `host_reads`): none happens outside the listed
  exceptions, each with its reason. On the CPU the model runs its device paths (backbone.on_host set to False: on
  the CPU itself reading costs nothing, and the CPU kernel plans its chunks on the host); on CUDA, where there is
  one, the real ones. The collator runs outside and may use the host.
- K accumulated batches of B/K rows of uneven lengths take the optimizer step of one batch of B rows (the
  gradient of the sum of the action NLLs over all the actions), the start pointer's loss (Nb-Up) included.
"""

from pathlib import Path

import pytest
import torch

from conftest import save_tiny_checkpoint

from hf_slm.data.collator import SyntacticDataCollator
from hf_slm.modeling import backbone

pytestmark = pytest.mark.slow  # conftest.py: scheduled first

REPOSITORY = Path(__file__).resolve().parents[1]
SAMPLE = REPOSITORY / "hf_slm" / "sample_data" / "gum" / "train.txt"
FAMILIES = ["tg", "tg-hybrid", "choe_charniak", "terminals", "dtg", "dtg_eager", "nb-dn-ex-m", "nb-up-in-m"]
DEVICES = [
    pytest.param("cpu", id="device-paths-on-cpu"),
    pytest.param("cuda", id="cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")),
]
# Where reading the device is inherent today: (the innermost function of this repository that reads, as
# "file.py:function") -> (the families it may read in, why).
# None is inherent any more: TG's and DTG's count of coordinate values (the width of the factorized attention's one-hot
# key block) is the collator's num_coordinate_values, and the Ex composer's order and sizes per tree level its
# composition_schedule, both computed on the host where the grammar ran. Without them the model reads them back,
# which the test below checks is caught. (Listed here: "file.py:function" of the innermost reader of this
# repository -> (the families it may read in, why).)
ALLOWED_READS = {}


def _tiny(family, tmp_path):
    """(model, tokenizer, trees) of a family's default config, small."""
    from helpers.compositional_models import LABELED
    from helpers.compositional_models import tiny as tiny_compositional
    from helpers.dependency_models import TREES
    from helpers.dependency_models import tiny as tiny_dependency

    if family in ("dtg", "dtg_eager"):
        model, tokenizer = tiny_dependency(family)
        return model, tokenizer, TREES
    if family.startswith(("nb-", "bi-")):
        model, tokenizer = tiny_compositional(family)
        return model, tokenizer, [tokenizer.unlabel(tree) for tree in LABELED]
    lines = SAMPLE.read_text().splitlines()[:6]
    grammar, fields = (("tg", dict(num_unrestricted_heads=2)) if family == "tg-hybrid" else (family, {}))
    _, model, tokenizer = save_tiny_checkpoint(tmp_path, lines, vocab_size=80, grammar=grammar, hidden_size=32,
                                               num_attention_heads=4, intermediate_size=64, **fields)
    return model, tokenizer, lines[:4]


def _on(batch, device):
    """The batch's tensors on `device`; its plain values (num_coordinate_values) as they are, as Trainer moves them."""
    return {name: value.to(device) if torch.is_tensor(value) else value for name, value in batch.items()}


def _collated(model, tokenizer, trees):
    from hf_slm.data.prepare_dependency import is_dependency_tokenizer

    options = {"variant": model.config.dependency_variant} if is_dependency_tokenizer(tokenizer) else {}
    collator = SyntacticDataCollator(model.grammar, tokenizer.action_layout,
                                     max_length=model.config.max_sequence_length, **options)
    return collator([dict(tokenizer(tree)) for tree in trees])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("family", FAMILIES)
def test_a_training_step_reads_nothing_back_from_the_device(family, device, host_reads, monkeypatch, tmp_path,
                                                            one_thread):
    model, tokenizer, trees = _tiny(family, tmp_path)
    batch = _on(_collated(model, tokenizer, trees), device)
    unexpected = _unexpected_reads(model, batch, device, family, host_reads, monkeypatch)
    assert not unexpected, f"{family}: the training step reads the device back in {unexpected}"


def _unexpected_reads(model, batch, device, family, host_reads, monkeypatch):
    """The reads back from the device of one training forward + backward of `model` on `batch` that ALLOWED_READS
    does not list, as sorted (reader, how)."""
    model.to(device).train()
    if device == "cpu":
        monkeypatch.setattr(backbone, "on_host", lambda tensor: False)
    model(**batch).loss.backward()  # a first step: one-time copies (tables) are made
    model.zero_grad()
    with host_reads:
        loss = model(**batch).loss
        loss.backward()
    assert torch.isfinite(loss.detach().cpu())
    return sorted({(reader, how) for reader, how in host_reads.reads
                   if family not in ALLOWED_READS.get(reader, ((), ""))[0]})


COUNTED = ["num_coordinate_values"]
SCHEDULED = ["composition_schedule", "composition_schedule_levels"]


@pytest.mark.parametrize("family,left_out,readers", [
    ("tg", COUNTED, {"backbone.py:num_coordinate_values"}),
    ("tg-hybrid", COUNTED, {"backbone.py:num_coordinate_values"}),
    ("dtg", COUNTED, {"backbone.py:num_coordinate_values"}),
    ("nb-dn-ex-m", SCHEDULED, {"composer.py:_device_schedule", "composer.py:compose_packed"}),
])
def test_without_the_collators_counts_the_model_reads_them_back_and_the_test_sees_it(family, left_out, readers,
                                                                                      host_reads, monkeypatch,
                                                                                      tmp_path, one_thread):
    """The check above is not blind: without what the collator counted on the host (a model loaded without hf-slm,
    a batch of another collator), the families whose coordinates are tree depths read their count back from the
    device, and the Ex composer its order and sizes per tree level."""
    model, tokenizer, trees = _tiny(family, tmp_path)
    batch = {name: value for name, value in _collated(model, tokenizer, trees).items() if name not in left_out}
    unexpected = _unexpected_reads(model, batch, "cpu", family, host_reads, monkeypatch)
    assert {reader for reader, _ in unexpected} == readers, unexpected


@pytest.mark.parametrize("device_paths", [False, True], ids=["cpu-kernel", "device-paths"])
@pytest.mark.parametrize("family", ["tg", "tg-hybrid", "dtg", "dtg_eager", "choe_charniak", "nb-dn-ex-m", "bi-up-ex-m",
                                    "nb-up-ex-m"])
def test_the_collators_counts_give_the_numbers_of_the_counts_read_from_the_device(family, device_paths, monkeypatch,
                                                                                  tmp_path, one_thread):
    """Logits, loss and gradients with the collator's num_coordinate_values and composition schedule are those
    without them, bit for bit; a count too small for the coordinates is an error (checked on the CPU, where it costs
    no sync)."""
    model, tokenizer, trees = _tiny(family, tmp_path)
    batch = _collated(model, tokenizer, trees)
    model.eval()
    if device_paths:
        monkeypatch.setattr(backbone, "on_host", lambda tensor: False)

    def run(inputs):
        model.zero_grad()
        output = model(**inputs)
        output.loss.backward()
        return output.logits.detach(), output.loss.detach(), [p.grad.clone() for p in model.parameters()
                                                              if p.grad is not None]

    given = run(batch)
    read = run({name: value for name, value in batch.items() if name not in COUNTED + SCHEDULED})
    assert torch.equal(given[0], read[0]) and torch.equal(given[1], read[1])
    assert all(torch.equal(a, b) for a, b in zip(given[2], read[2], strict=True))
    if not device_paths and family in ("tg", "dtg"):
        with pytest.raises(ValueError, match=r"num_coordinate_values\) is 2; the coordinates take [3-9] values"):
            model(**{**batch, "num_coordinate_values": 2})


def test_the_device_paths_compute_the_numbers_of_the_cpu_kernel(monkeypatch, tmp_path, one_thread):
    """The device paths that the test above runs (no reads back) give the CPU kernel's logits and gradients."""
    for family in ("tg", "tg-hybrid", "dtg", "choe_charniak"):
        model, tokenizer, trees = _tiny(family, tmp_path / family)
        batch = _collated(model, tokenizer, trees)
        model.eval()

        def run():
            model.zero_grad()
            output = model(**batch)
            output.loss.backward()
            return output.logits.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None]

        (cpu_logits, cpu_grads) = run()
        with monkeypatch.context() as patch:
            patch.setattr(backbone, "on_host", lambda tensor: False)
            device_logits, device_grads = run()
        real = torch.isfinite(cpu_logits)
        torch.testing.assert_close(device_logits[real], cpu_logits[real], rtol=1e-5, atol=1e-5)
        for device_grad, cpu_grad in zip(device_grads, cpu_grads, strict=True):
            torch.testing.assert_close(device_grad, cpu_grad, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("family", ["nb-dn-ex-m", "bi-up-ex-m", "nb-up-ex-m"])
def test_the_host_composition_schedule_is_the_one_read_from_the_device(family, tmp_path, one_thread):
    """composer.composition_schedule (numpy, the collator's) gives the indices and per-level sizes that the composer
    reads from the device tensors without it, and the widest constituent of each level."""
    from hf_slm.modeling.compositional_grammars import composition_schedule

    model, tokenizer, trees = _tiny(family, tmp_path)
    batch = _collated(model, tokenizer, trees)
    indices, levels = composition_schedule(batch["composition_children"].numpy(), batch["composition_level"].numpy())
    device_indices, device_levels = model.model.composer._device_schedule(batch["composition_children"],
                                                                          batch["composition_level"])
    assert len(levels) > 1 and torch.equal(torch.from_numpy(indices), device_indices)
    assert [entry[:3] for entry in levels] == [entry[:3] for entry in device_levels]
    ranks = indices.tolist()[sum(e[0] for e in levels) + sum(e[1] for e in levels):][: sum(e[1] for e in levels)]
    by_level = iter(ranks)
    assert [entry[3] for entry in levels] == [1 + max(next(by_level) for _ in range(entry[1])) for entry in levels]
    assert torch.equal(batch["composition_schedule"], torch.from_numpy(indices))
    assert batch["composition_schedule_levels"] == levels


# ---- gradient accumulation ----------------------------------------------------------------------------------------
def _one_step(model, state, dataset, collator, batch_size, accumulation, output):
    """(the parameters, the Trainer) after one plain SGD step (lr 1, no clipping) of SyntacticTrainer from `state`,
    reading `dataset` in order, `batch_size` rows per batch, `accumulation` batches per step."""
    from transformers import TrainingArguments

    from hf_slm.training.train import SyntacticTrainer

    model = type(model)(model.config)
    model.load_state_dict(state)
    args = TrainingArguments(output_dir=str(output), max_steps=1, per_device_train_batch_size=batch_size,
                             gradient_accumulation_steps=accumulation, max_grad_norm=0.0, report_to=[],
                             use_cpu=True, save_strategy="no", logging_steps=1, disable_tqdm=True,
                             train_sampling_strategy="sequential", dataloader_num_workers=0)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    trainer = SyntacticTrainer(model=model, args=args, train_dataset=dataset, data_collator=collator,
                               optimizers=(optimizer, scheduler))
    trainer.train()
    return {name: value.detach().clone() for name, value in model.state_dict().items()}, trainer


@pytest.mark.parametrize("family", ["tg", "nb-up-in-m"])
def test_accumulated_batches_take_the_step_of_one_batch_holding_them_all(family, tmp_path, one_thread):
    """K = 2 batches of 2 rows, the first two rows much shorter than the last two, take the step of one batch of the
    4 rows: the gradient of the sum of the NLLs of all the actions over their number (and of the `)` starts over
    theirs, Nb-Up), not the average of the two batches' means."""
    from datasets import Dataset

    model, tokenizer, trees = _tiny(family, tmp_path / "model")
    for name, value in vars(model.config).items():  # the same forward in both runs
        if name.endswith("dropout"):
            setattr(model.config, name, 0.0)
    features = sorted((dict(tokenizer(tree)) for tree in trees), key=lambda feature: len(feature["input_ids"]))
    features = [features[0], features[0], features[-1], features[-1]]
    lengths = [len(feature["input_ids"]) for feature in features]
    assert 2 * lengths[0] < 2 * lengths[-1] - 4, lengths
    dataset = Dataset.from_dict({name: [feature[name] for feature in features] for name in features[0]})
    collator = SyntacticDataCollator(model.grammar, tokenizer.action_layout,
                                     max_length=model.config.max_sequence_length)
    start = {name: value.clone() for name, value in model.state_dict().items()}
    whole, whole_trainer = _one_step(model, start, dataset, collator, 4, 1, tmp_path / "whole")
    accumulated, accumulated_trainer = _one_step(model, start, dataset, collator, 2, 2, tmp_path / "accumulated")
    assert any(not torch.equal(whole[name], start[name]) for name in start), "the step changed nothing"
    for name in start:
        torch.testing.assert_close(accumulated[name], whole[name], rtol=1e-5, atol=1e-6, msg=name)
    # the logged loss is the step's mean over its actions in both
    losses = [[entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
              for trainer in (whole_trainer, accumulated_trainer)]
    assert losses[0] == pytest.approx(losses[1], rel=1e-5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("family", ["nb-up-ex-m", "dtg"])
def test_a_packed_training_step_reads_nothing_back_from_the_device(family, device, host_reads, monkeypatch, tmp_path,
                                                                   one_thread):
    """Packed rows (hf_slm/data/packing.py) add position_indices, which the model takes as they are: no read."""
    model, tokenizer, trees = _tiny(family, tmp_path)
    from hf_slm.data.prepare_dependency import is_dependency_tokenizer

    options = {"variant": model.config.dependency_variant} if is_dependency_tokenizer(tokenizer) else {}
    features = [dict(tokenizer(tree)) for tree in trees]
    names = [name for name in ("input_ids", "constituent_starts") if name in features[0]]
    rows = [{name: features[0][name] + features[1][name] for name in names},
            {name: features[2][name] for name in names}]
    batch = SyntacticDataCollator(model.grammar, tokenizer.action_layout, packed=True, **options)(rows)
    assert "position_indices" in batch
    unexpected = _unexpected_reads(model, _on(batch, device), device, family, host_reads, monkeypatch)
    assert not unexpected, f"{family}: the packed training step reads the device back in {unexpected}"
