"""Word-synchronous beam search (issue 41, section 3): the host waits for the device once per decoder call, no more.

By design the search keeps its hypotheses on the host (grammar rows as numpy, scores, actions, statuses), and a
decoder (search_decoders.py) uploads each call's inputs, runs the model, and brings back the next action's
log-probabilities (`.cpu()`): one transfer back per call, after which the device has nothing left to do. What this
module counts is every other moment the host would wait for the device, with the watcher of the training step's test
(helpers/host_reads.py):
- inside the decoder's calls (TransformerSearchDecoder._advance, _start_from_memory, pointer_log_probs, select, concat,
  retain: the model, its family hooks search_embeddings / after_search_forward / search_pointer_log_probs, the key/value
  pool): any read of a device value (item, int, bool, float, tolist, numpy, cpu, nonzero, boolean indexing, unique,
  repeat_interleave, ...) but the planned transfer (PLANNED), and any tensor made from host data (an upload, a copy
  that waits for the device's queue) once the call has queued device work since its last transfer back; a call
  uploading its inputs before its first kernel costs no wait;
- outside them, in the search loop: any read of, or work on, a tensor that lives on the model's device.
On the CPU the model runs its device paths (backbone.on_host set to False, as the training step's test) and "on the
device" is followed through the dispatcher: the model's parameters and buffers, what the decoder's calls compute and
upload, and what is computed from those, until the planned transfer brings a tensor back; on CUDA, where there is one,
it is the tensor's device. Every registered family whose LM the search drives has a case (a test says so), and so has
an ensemble (a model with its own decoder, which runs its members'); SOM has no grammar (its LM is a words-only
recurrent model that transformers' own generate searches), so no case.
The last tests show the count is not blind: an `.item()`, a `nonzero` or an upload after the model's work in the
model's path, and log-probabilities left on the device for the search loop, are each caught and named.
"""

import weakref

import numpy as np
import pytest
import torch
from torch.utils._pytree import tree_flatten

from hf_slm import BeamSearchOptions, WordSynchronousBeamSearch
from hf_slm.families import grammar_class, registered_families
from hf_slm.modeling import backbone
from hf_slm.modeling.search_decoders import SearchDecoder, TransformerSearchDecoder
from hf_slm.search.beam import words_to_pieces
from hf_slm.search.ensemble import MixtureSearchDecoder

from helpers.host_reads import HostReads, is_data_sized, reader, watch_host_reads

DEVICES = [
    pytest.param("cpu", id="device-paths-on-cpu"),
    pytest.param("cuda", id="cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")),
]
# The transfers back that the design plans, one per decoder call: (reader, how) -> why.
PLANNED = {
    ("search_decoders.py:_log_probs", "Tensor.cpu"):
        "the next action's log-probabilities of every row the call ran: the search chooses among them on the host",
    ("search_decoders.py:pointer_log_probs", "Tensor.cpu"):
        "Nb-Up: the start pointer's log-probabilities of each row's candidate starts, that call's one transfer back",
}
# Waits that remain, each with its reason: (decoder call, reader, how) -> why. Only in the call named: anywhere else
# the same read fails the test.
SEGMENTS = ("once per search, not per step: a segment model reads each document prefix segment by segment "
            "(segment_recurrence.read_prefixes, shared with segment training and scoring), each segment collated on the "
            "host after the previous one's forward, its label count (SegmentOutput.num_predicted) and its coordinates' "
            "count (PositionStructure.num_coordinate_values: no host bound there) read back")
ALLOWED_READS = {
    ("_start_from_memory", "segment_recurrence.py:segment_forward", "_local_scalar_dense"): SEGMENTS,
    ("_start_from_memory", "backbone.py:num_coordinate_values", "_local_scalar_dense"): SEGMENTS,
    ("_start_from_memory", "segment_recurrence.py:stack", "torch.from_numpy after device work"): SEGMENTS,
    ("_start_from_memory", "segment_recurrence.py:collate_segments", "torch.from_numpy after device work"): SEGMENTS,
}
# The decoder's calls, and how many planned transfers back each makes.
DECODER_CALLS = {"_advance": 1, "_start_from_memory": 1, "pointer_log_probs": 1, "select": 0, "concat": 0, "retain": 0}
# Copies between the host and the device seen by the dispatcher (CUDA): an upload is not device work to wait for.
COPIES = {"_to_copy", "copy_", "to", "_copy_from", "_copy_from_and_resize"}
# What torch.tensor dispatches to make its tensor: part of the upload, not work.
MAKING = {"lift", "lift_fresh", "lift_fresh_copy"}


class _Tensors:
    """A set of tensors by identity that does not keep them alive (a WeakSet compares tensors by value)."""

    def __init__(self):
        self.held = {}

    def add(self, tensor):
        key = id(tensor)
        if key not in self.held:
            self.held[key] = weakref.ref(tensor, lambda _, key=key: self.held.pop(key, None))

    def discard(self, tensor):
        self.held.pop(id(tensor), None)

    def __contains__(self, tensor):
        found = self.held.get(id(tensor))
        return found is not None and found() is tensor


class SearchReads(HostReads):
    """HostReads that knows which tensors live on the model's device and when the decoder's calls run (module
    docstring). `reads` are the unplanned waits as (decoder call or "the search loop", reader, how); `calls` are
    (decoder call, its planned transfers back)."""

    def __init__(self, device, model):
        super().__init__()
        self.device = device
        self.on_device = _Tensors()  # the CPU's stand-in for the device
        if device == "cpu":
            for tensor in list(model.parameters()) + list(model.buffers()):
                self.on_device.add(tensor)
        self.depth = 0  # inside a decoder call when > 0
        self.current = "the search loop"  # the decoder call running
        self.queued = 0  # device operations of this call since its last transfer back
        self.planned = 0
        self.calls = []
        self.work_outside = []  # (reader, operator) of device work in the search loop

    def lives_on_device(self, tensor):
        if self.device == "cpu":
            return tensor in self.on_device
        return tensor.device.type != "cpu"

    def note(self, how, tensor=None):
        if not self.active:
            return
        if tensor is None:  # a tensor made from host data: an upload, a wait once work is queued
            if self.depth and self.queued:
                self.reads.append((self.current, reader(), f"{how} after device work"))
            return
        if not self.lives_on_device(tensor):
            return  # the search's host bookkeeping (its rows, actions) handed to the decoder
        where = reader()
        if self.depth and (where, how) in PLANNED:
            self.planned += 1
            self.queued = 0  # the transfer waited for everything: nothing is queued after it
            if self.device == "cpu":
                self.on_device.discard(tensor)  # .cpu() is the tensor itself on the CPU: from now on the host's
            return
        self.reads.append((self.current, where, how))

    def made(self, tensor):
        if self.active and self.depth and self.device == "cpu" and torch.is_tensor(tensor):
            self.on_device.add(tensor)  # made inside a decoder call to be uploaded

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        inputs = [t for t in tree_flatten((args, kwargs))[0] if torch.is_tensor(t)]
        on_device = any(self.lives_on_device(t) for t in inputs)
        name = func.overloadpacket.__name__
        if self.active and on_device and is_data_sized(func, args):
            self.reads.append((self.current, reader(), name))
        output = func(*args, **kwargs)
        if not self.active:
            return output
        outputs = [t for t in tree_flatten(output)[0] if torch.is_tensor(t)]
        if self.device == "cpu":
            # in a decoder call a factory makes a device tensor; an operator on host tensors only (the search's rows
            # the call reads) is the host's
            device_work = (on_device or (bool(self.depth) and not inputs)) and name not in MAKING
            if device_work or (self.depth and name in MAKING):
                for tensor in outputs:
                    self.on_device.add(tensor)
        else:
            produces = any(t.device.type != "cpu" for t in outputs)
            upload = name in COPIES and not on_device
            download = name in COPIES and on_device and not produces
            if download and (reader(), "Tensor.cpu") not in PLANNED:
                self.reads.append((self.current, reader(), f"{name} to the host"))
            device_work = (on_device or produces) and not upload and not download
        if device_work:
            if self.depth:
                self.queued += 1
            else:
                self.work_outside.append((reader(), name))
        return output

    def call(self, name, method):
        """`method` of a decoder, run as one decoder call."""

        def run(decoder, *args, **kwargs):
            outermost = self.depth == 0
            if outermost:
                self.queued, self.planned, self.current = 0, 0, name
            self.depth += 1
            try:
                return method(decoder, *args, **kwargs)
            finally:
                self.depth -= 1
                if outermost:
                    self.current = "the search loop"
                    if self.active:
                        self.calls.append((name, self.planned))

        return run


# ---- the cases: a variant of every family whose LM the search drives ----------------------------------------------
def _vocabulary_case(grammar, **overrides):
    from helpers.beam_search_models import SENTENCE, VOCAB, tiny_model

    model = tiny_model(grammar, seed=1, **overrides)
    starts = [token in ("a", "b1", "c") for token in VOCAB.tokens]  # b2 continues b1
    return model, starts, [SENTENCE, SENTENCE[:1], SENTENCE[::-1] + SENTENCE[:2]], None


def _tokenizer_case(model, tokenizer, sentences):
    return model, tokenizer.word_start_mask, [words_to_pieces(tokenizer, words)[0] for words in sentences], None


def _dependency_case(grammar):
    from helpers.dependency_models import TREES, tiny

    model, tokenizer = tiny(grammar)
    words = [[item.split("/")[0] for item in tree.split()] for tree in TREES]
    return _tokenizer_case(model, tokenizer, words[:3])


def _compositional_case(grammar):
    from helpers.compositional_models import tiny

    model, tokenizer = tiny(grammar)
    return _tokenizer_case(model, tokenizer, [["the", "blue", "bird", "sings", "."], ["the", "dog", "barks"],
                                              ["Write", "an", "essay"]])


def _document_case():
    """A segment model (config.segment_length) searching after document prefixes it reads through its memory."""
    from helpers.beam_search_models import tiny_model
    from helpers.random_documents import VOCAB, random_document

    rng = np.random.default_rng(5)
    prefixes = []
    while len(prefixes) < 2:
        prefix = VOCAB.encode([action for tree in random_document(rng) for action in tree])
        if len(prefix) > 12:
            prefixes.append(prefix)
    model = tiny_model("tg", seed=2, vocab=VOCAB, document_level=True)
    model.config.segment_length, model.config.memory_length, model.config.memory_update = 4, 8, "shift"
    words = [[[VOCAB.ids["the"]], [VOCAB.ids["bird"]], [VOCAB.ids["sings"]]], [[VOCAB.ids["a"]], [VOCAB.ids["song"]]]]
    return model, None, words, prefixes


def _ensemble_case():
    """A uniform mixture of a TG and a TXL (CC) (paper 000's ensembles): its own decoder runs each member's."""
    from hf_slm.search.ensemble import UniformMixture

    model, starts, words, prefixes = _vocabulary_case("tg")
    other, *_ = _vocabulary_case("choe_charniak")
    return UniformMixture([model, other]), starts, words, prefixes


CASES = {
    "tg": lambda: _vocabulary_case("tg"),
    "tg-hybrid": lambda: _vocabulary_case("tg", num_unrestricted_heads=1),
    "tg-distinct-compose": lambda: _vocabulary_case("tg", distinct_compose_attention=True),
    "tg_txl_positions": lambda: _vocabulary_case("tg_txl_positions"),
    "choe_charniak": lambda: _vocabulary_case("choe_charniak"),
    "terminals": lambda: _vocabulary_case("terminals"),
    "rnng": lambda: _vocabulary_case("rnng"),  # a recurrent family's own decoder (hf_slm/families/recurrent_grammars)
    "tg-document-memory": _document_case,
    "dtg": lambda: _dependency_case("dtg"),
    "dtg_eager": lambda: _dependency_case("dtg_eager"),
    "txl_trans": lambda: _dependency_case("txl_trans"),
    "nb-dn-in-m": lambda: _compositional_case("nb-dn-in-m"),  # paper 003, internal composition
    "bi-dn-ex-m": lambda: _compositional_case("bi-dn-ex-m"),  # external composition (the composer)
    "nb-up-in-m": lambda: _compositional_case("nb-up-in-m"),  # the start pointer
    "nb-up-ex-m": lambda: _compositional_case("nb-up-ex-m"),  # both
    "ensemble": _ensemble_case,
}
OPTIONS = BeamSearchOptions(beam_size=12, word_beam_size=4, fast_track=2, num_trees=2)


def test_every_family_the_search_drives_has_a_case():
    """A family with grammars (its LM is searched word-synchronously) has a case here; SOM has none (no grammar)."""
    searched = {family.name for family in registered_families() if family.grammar_classes}
    covered = set()
    for case in CASES:
        name = {"tg-hybrid": "tg", "tg-distinct-compose": "tg", "tg-document-memory": "tg",
                "ensemble": "tg"}.get(case, case)
        covered |= {family.name for family in registered_families()
                    if family.grammar_classes and name in family.grammar_classes}
    assert covered == searched
    assert {family.name for family in registered_families() if not family.grammar_classes} == \
        {"syntactic_ordered_memory"}
    assert grammar_class("nb-up-in-m").takes_start  # the pointer's case is one


def _search(case, device, monkeypatch, faults=None):
    """(mode, results) of a beam search of `case` on `device`, every decoder call and the loop watched."""
    model, starts, words, prefixes = CASES[case]()
    model.to(device).eval()
    if device == "cpu":
        monkeypatch.setattr(backbone, "on_host", lambda tensor: False)
    search = WordSynchronousBeamSearch(model, OPTIONS, word_start_mask=starts)
    search.search(words[:1], prefixes=None if prefixes is None else prefixes[:1])  # one-time copies (tables) made
    mode = watch_host_reads(monkeypatch, SearchReads(device, model))
    # the decoder of the model's family (a recurrent family's own), or a mixture's members' (Transformer decoders)
    decoder = TransformerSearchDecoder if isinstance(search.decoder, MixtureSearchDecoder) else type(search.decoder)
    for name in DECODER_CALLS:
        if hasattr(decoder, name):
            monkeypatch.setattr(decoder, name, mode.call(name, getattr(decoder, name)))
    if faults is not None:
        faults(model, monkeypatch)
    with mode:
        results = search.search(words, prefixes=prefixes)
    return mode, results


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", list(CASES))
def test_the_search_waits_for_the_device_once_per_decoder_call(case, device, monkeypatch, one_thread):
    mode, results = _search(case, device, monkeypatch)
    assert all(result.trees for result in results)
    unexpected = sorted({read for read in mode.reads if read not in ALLOWED_READS})
    assert not unexpected, f"{case}: the search reads the device back in {unexpected}"
    assert not mode.work_outside, f"{case}: the search loop works on the device in {sorted(set(mode.work_outside))}"
    kinds = {name for name, _ in mode.calls}
    assert {"_advance", "select", "concat", "retain"} <= kinds
    if case == "tg-document-memory":
        assert "_start_from_memory" in kinds
    if case.startswith("nb-up"):
        assert "pointer_log_probs" in kinds
    wrong = [(name, planned) for name, planned in mode.calls if planned != DECODER_CALLS[name]]
    assert not wrong, f"{case}: decoder calls with other than their planned transfers back: {wrong[:5]}"


# ---- the count is not blind --------------------------------------------------------------------------------------
def _item_in_the_model(model, monkeypatch):
    forward = type(model).forward_positions

    def reading(self, position_ids, structure, *args, **kwargs):
        int(structure.coordinates.max())  # a Python branch on a device value
        return forward(self, position_ids, structure, *args, **kwargs)

    monkeypatch.setattr(type(model), "forward_positions", reading)


def _nonzero_in_a_hook(model, monkeypatch):
    hook = type(model.model).search_embeddings

    def reading(self, pool, input_ids, new_slots, references, order):
        torch.nonzero(input_ids)
        return hook(self, pool, input_ids, new_slots, references, order)

    monkeypatch.setattr(type(model.model), "search_embeddings", reading)


def _upload_after_the_forward(model, monkeypatch):
    hook = type(model.model).after_search_forward

    def uploading(self, pool, structure, new_slots):
        structure.kinds + 1  # device work, then an upload waits for it
        torch.from_numpy(np.asarray(new_slots)).to(structure.kinds.device)
        return hook(self, pool, structure, new_slots)

    monkeypatch.setattr(type(model.model), "after_search_forward", uploading)


def _log_probs_left_on_the_device(model, monkeypatch):
    def kept_there(self, forward, *arguments, **keywords):
        return torch.log_softmax(forward(*arguments, **keywords).float(), dim=-1)

    monkeypatch.setattr(SearchDecoder, "_log_probs", kept_there)


@pytest.mark.parametrize("faults, expected", [
    (_item_in_the_model, {("_advance", "search_decoders.py:_log_probs", "_local_scalar_dense")}),
    (_nonzero_in_a_hook, {("_advance", "search_decoders.py:_advance", "nonzero")}),
    (_upload_after_the_forward, {("_advance", "search_decoders.py:_advance", "torch.from_numpy after device work")}),
], ids=["item-in-the-model", "nonzero-in-a-hook", "upload-after-the-forward"])
def test_a_read_in_the_models_search_path_is_caught(faults, expected, monkeypatch, one_thread):
    """The check above is not blind: a read back added to the model's path is named (its reader is the innermost
    function of the repository on the stack: here the decoder, which calls the test's patched model)."""
    mode, _ = _search("tg", "cpu", monkeypatch, faults)
    assert set(mode.reads) == expected


def test_log_probabilities_left_on_the_device_are_caught_in_the_search_loop(monkeypatch, one_thread):
    """Without the planned transfer the search loop itself works on the device and reads it (a `.tolist()` of the
    chosen rows, a Python float of a score), and no decoder call has its transfer back."""
    mode, _ = _search("tg", "cpu", monkeypatch, _log_probs_left_on_the_device)
    assert {reader for reader, _ in mode.work_outside} >= {"generation_slm.py:_next_word"}
    assert {(call, reader) for call, reader, _ in mode.reads} >= {("the search loop", "generation_slm.py:_next_word")}
    assert all(planned == 0 for _, planned in mode.calls)
