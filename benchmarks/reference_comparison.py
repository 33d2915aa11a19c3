"""hf-slm's paper-000 models beside the authors' reference implementation (JAX and Haiku), on the same weights and the
same action ids (issue 39): the largest difference of next-action log-probabilities per case.

    python benchmarks/reference_comparison.py --reference PATH --python VENV/bin/python \
        [--markdown benchmarks/results/reference_comparison.md] [--work DIR]

`--reference` is a checkout of the reference (google-deepmind/transformer_grammars) whose C++ masking extension is
built; `--python` the interpreter of an environment where it runs (jax, jaxlib, dm-haiku, einshape, dm-tree, numpy).
The two environments meet through files: this script (hf-slm's side) builds each case's model, draws its weights,
computes hf-slm's log-probabilities and writes the weights, the action ids and the reference's settings into
`--work`; benchmarks/reference_comparison_jax.py, run by `--python`, builds the reference's model from its own code
(common.build_forward, its masking rules and its chunking, as its score.py does), loads the same weights into its
Haiku parameters and writes its log-probabilities; this script compares them. docs/benchmarks.md says how to set up
the reference's environment.

The cases: tiny models (d 32, 4 heads, 2 layers, d_ff 64) at each side's defaults (hf-slm's paper-000 presets'
fields, the reference's config_tg.py / config_txl.py), every parameter drawn anew from a fixed seed (the
initialization leaves biases at 0 and LayerNorms at 1, which would hide a mistake in them). Sentences: the first tree
of each of the first six documents of the shipped GUM sample's test split, each read whole (the reference: one chunk
whose memory is empty). Documents: the first three trees of three test documents after one `<s>`, read in segments
of L = 16 positions with a memory of M = 16 (the reference requires M = L), so that each spans several segments.
Compared: log-softmax over the whole vocabulary at every position that predicts an action (sentences: each action's
output, as the model's forward gives it), and at every position of the documents' segments (COMPOSE copies too).
"""

import argparse
import json
import math
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from report import Report, add_markdown_option

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "hf_slm" / "sample_data" / "gum"
REFERENCE_SIDE = Path(__file__).resolve().parent / "reference_comparison_jax.py"
MODEL = dict(hidden_size=32, num_attention_heads=4, num_hidden_layers=2, intermediate_size=64)
SEED = 0
SEGMENT_LENGTH = 16
SENTENCE_DOCUMENTS = range(6)  # the first tree of each of these test documents
DOCUMENTS, DOCUMENT_TREES = (0, 3, 7), 3  # the first trees of these test documents
# Log-probabilities within this many nats agree to float32 rounding (the logits of these models span tens of nats).
TOLERANCE = 1e-4


@dataclass(frozen=True)
class Case:
    name: str
    grammar: str
    documents: bool  # read in segments with a memory (else: one sentence per sequence, read whole)
    options: dict = field(default_factory=dict)  # config fields beyond the preset's
    by_design: str = ""  # a difference docs/families/tg.md states: expected to differ


CASES = [
    Case("TG", "tg", False),
    # A control: the exact GELU, which the reference does not compute (a config built without a preset takes it)
    Case("TG, exact GELU (hidden_act='gelu')", "tg", False, {"hidden_act": "gelu"},
         by_design="the exact GELU; the reference's jax.nn.gelu is the tanh approximation"),
    Case("TG, distinct COMPOSE attention", "tg", False, {"distinct_compose_attention": True}),
    Case("TG, 1 of 4 heads unrestricted", "tg", False, {"num_unrestricted_heads": 1}),
    Case("TG, top layer unrestricted", "tg", False, {"num_unrestricted_layers": 1}),
    Case("TXL (CC)", "choe_charniak", False),
    Case("TXL (terminals)", "terminals", False),
    Case("TG, structure memory", "tg", True),
    Case("TG, structure memory, distinct COMPOSE attention", "tg", True, {"distinct_compose_attention": True}),
    Case("TG (TXL memory)", "tg", True, {"memory_update": "shift"}),
    Case("TG (TXL mem. & rel. pos.)", "tg_txl_positions", True),
    Case("TXL (CC)", "choe_charniak", True),
    Case("TG, 1 of 4 heads unrestricted, structure memory, reading shift", "tg", True,
         {"num_unrestricted_heads": 1, "unrestricted_memory_reading": "shift"}),
    Case("TG, top layer unrestricted, structure memory, reading shift", "tg", True,
         {"num_unrestricted_layers": 1, "unrestricted_memory_reading": "shift"}),
    Case("TG, 1 of 4 heads unrestricted, structure memory, reading distance (default)", "tg", True,
         {"num_unrestricted_heads": 1}, by_design="hybrid heads read a memory slot at its true distance"),
]
# The preset whose model fields each grammar's cases take (their sizes replaced by MODEL's)
PRESETS = {"tg": "tg-ptb", "tg_txl_positions": "tg-txl-positions-ptb", "choe_charniak": "txl-cc-ptb",
           "terminals": "txl-terminals-ptb"}


def test_documents():
    """The trees of the shipped GUM sample's test split, grouped by document (documents.json)."""
    from hf_slm import read_trees

    trees = read_trees([SAMPLE / "test.txt"])
    documents, start = [], 0
    for _name, count in json.loads((SAMPLE / "documents.json").read_text())["test"]:
        documents.append(trees[start : start + count])
        start += count
    return documents


def case_actions(documents):
    """(sentences, documents): top-down actions of each sentence, and each document's trees' actions one after the
    other."""
    from hf_slm.tokenization.linearizers import top_down_actions

    sentences = [top_down_actions(documents[d][0]) for d in SENTENCE_DOCUMENTS]
    chosen = [[a for tree in documents[d][:DOCUMENT_TREES] for a in top_down_actions(tree)] for d in DOCUMENTS]
    return sentences, chosen


def case_ids(case, vocabulary, sentences, documents):
    """The action ids each case reads: `<s>` + actions; TXL (terminals) reads the words and `</s>`."""
    from hf_slm.tokenization.linearizers import is_close_nt, is_open_nt

    sequences = documents if case.documents else sentences
    if case.grammar == "terminals":
        return [vocabulary.encode([a for a in actions if not (is_open_nt(a) or is_close_nt(a))], add_eos=True)
                for actions in sequences]
    return [vocabulary.encode(actions) for actions in sequences]


def case_config(case, vocabulary):
    """The hf-slm config: the grammar's paper-000 preset's model fields, MODEL's sizes, the case's options."""
    from hf_slm.families import all_presets, config_for_grammar

    fields = dict(all_presets()[PRESETS[case.grammar]][1]["model"], **MODEL)
    fields.update(vocab_size=len(vocabulary.tokens), document_level=case.documents and case.grammar != "terminals",
                  **vocabulary.layout.to_dict(), **case.options)
    if case.documents:
        fields["segment_length"] = SEGMENT_LENGTH
    return config_for_grammar(**fields)


def randomize_weights(model, seed):
    """Every parameter drawn anew from `seed`: weight matrices at unit output scale, embeddings at unit scale (peaked
    distributions, not flat ones), LayerNorm gains around 1, biases, u and v around 0 but not at it."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            noise = torch.randn(parameter.shape, generator=generator)
            if name.endswith("embed_tokens.weight"):
                parameter.copy_(noise)
            elif name.endswith((".u", ".v")):
                parameter.copy_(0.5 * noise)
            elif parameter.dim() == 2:
                parameter.copy_(noise / math.sqrt(parameter.shape[1]))
            elif ".ln_" in name and name.endswith(".weight"):
                parameter.copy_(1 + 0.1 * noise)
            else:
                parameter.copy_(0.1 * noise)


def sentence_log_probs(model, ids):
    """(expanded position of each action's output [T], the expanded ids [T'], log p over the vocabulary [T, V]):
    the model's forward over the whole sentence."""
    input_ids = torch.tensor([ids])
    with torch.no_grad():
        expanded = model.model.positions_of_actions(input_ids)
        logits = model(input_ids=input_ids).logits[0]
    return (expanded.prediction_index[0].numpy(), expanded.position_ids[0].numpy(),
            torch.log_softmax(logits.float(), -1).numpy())


def document_log_probs(model, ids):
    """The same three for a document read segment by segment with its memory (every position of every segment)."""
    from hf_slm.modeling.segment_recurrence import collate_segments, empty_memory, segment_forward
    from hf_slm.modeling.segments import segment_sequence

    config = model.config
    segmented = segment_sequence(model.grammar, ids, config.segment_length, config.memory_length, config.memory_update)
    memory = empty_memory(model, 1, segmented.memory_length)
    positions, expanded, log_probs = [], [], []
    for tau in range(segmented.num_segments):
        with torch.no_grad():
            out = segment_forward(model, collate_segments([(segmented, tau)]), memory, compute_loss=False)
        memory = out.memory
        real = segmented.segment_positions[tau] >= 0
        positions.append(segmented.segment_positions[tau][real])
        expanded.append(segmented.input_ids[tau][real])
        log_probs.append(torch.log_softmax(out.logits[0].float(), -1)[torch.from_numpy(real)].numpy())
    return np.concatenate(positions), np.concatenate(expanded), np.concatenate(log_probs)


def reference_config(config, sequence_length, memory_update):
    """The reference's model config (its configs/config_tg.py and config_txl.py fields) for an hf-slm config read in
    chunks of `sequence_length` (its memory has as many slots) with hf-slm's `memory_update` ("structure": its
    gather_into_new_memory). TG's relative positions are depth differences clipped to [-1, 62] on both sides (hf-slm's
    default); the others are i - j (the reference's relative shift: no clipping within a segment and its memory)."""
    settings = dict(
        vocab_size=config.vocab_size, d_model=config.hidden_size, num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads, ffw_hidden_size=config.intermediate_size,
        embedding_dropout=config.embedding_dropout, core_dropout=config.core_dropout,
        core_output_dropout=config.final_dropout, sequence_length=sequence_length, memory_length=sequence_length,
        tied_input_output_embeddings=True, relative_position_embeddings=1, tied_layer_weights=0,
        num_unrestricted_layers=config.num_unrestricted_layers,
        num_unrestricted_heads=config.num_unrestricted_heads or None,
    )
    if config.grammar in ("tg", "tg_txl_positions"):
        depth = config.grammar == "tg"
        settings["extra_attention_mask_name"] = "stack_compose_double_closing_nt"
        settings["extra_attention_mask_kwargs"] = dict(
            relative_pos="delta_depth" if depth else "", use_different_attn_fns=int(config.distinct_compose_attention),
            transparency_prob=0.0, gather_into_new_memory=int(memory_update == "structure"),
            transparency_depth_threshold=-1)
        if depth:
            settings.update(min_relative_position=config.min_relative_position,
                            max_relative_position=config.max_relative_position)
    return settings


def token_type_ranges(vocabulary):
    """The reference's TokenTypeRanges fields for the action vocabulary: specials, then words, then opening and
    closing nonterminals, each a range of ids."""
    layout = vocabulary.layout
    return dict(start_token=layout.bos_token_id, pad_token=layout.pad_token_id, end_token=layout.eos_token_id,
                placeholder_token=layout.unk_token_id, terminals=[4, layout.open_nt_start],
                opening_non_terminals=[layout.open_nt_start, layout.open_nt_stop],
                closing_non_terminals=[layout.close_nt_start, layout.close_nt_stop],
                has_extra_untyped_closing_non_terminal=False, vocab_size=len(vocabulary.tokens))


def hf_side(case, vocabulary, sentences, documents, folder):
    """Run hf-slm on the case and write what the reference's side reads into `folder`; returns hf-slm's results,
    one (positions, expanded ids, log-probs) per sequence."""
    from hf_slm.families import causal_lm_for_config
    from hf_slm.modeling.segments import check_segment_options

    config = case_config(case, vocabulary)
    torch.manual_seed(SEED)
    model = causal_lm_for_config(config).eval()
    randomize_weights(model, SEED)
    sequences = case_ids(case, vocabulary, sentences, documents)
    read = document_log_probs if case.documents else sentence_log_probs
    results = [read(model, ids) for ids in sequences]
    if case.documents:
        length, _, memory_update = check_segment_options(model.grammar, config.segment_length, config.memory_length,
                                                         config.memory_update)
    else:  # one chunk holds the longest sentence; its memory stays empty
        length, memory_update = max(len(expanded) for _, expanded, _ in results), "structure"
    state = model.state_dict()
    assert torch.equal(state.pop("lm_head.weight"), state["model.decoder.embed_tokens.weight"]), "untied output"
    folder.mkdir(parents=True, exist_ok=True)
    np.savez(folder / "weights.npz", **{name: tensor.numpy() for name, tensor in state.items()})
    np.savez(folder / "sequences.npz", **{f"ids_{k}": np.asarray(ids, np.int32) for k, ids in enumerate(sequences)})
    (folder / "case.json").write_text(json.dumps({
        "name": case.name, "reference_config": reference_config(config, length, memory_update),
        "token_type_ranges": token_type_ranges(vocabulary)}, indent=1))
    return results


def run_reference(python, reference, work):
    """The reference's side, in its own environment; returns its versions line."""
    done = subprocess.run([python, str(REFERENCE_SIDE), "--reference", str(reference), "--cases", str(work)],
                          capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"the reference's side failed ({python} {REFERENCE_SIDE.name}):\n{done.stderr[-4000:]}")
    return done.stdout.strip().splitlines()[-1]


def largest_difference(results, folder):
    """(positions compared, largest |log p difference| in nats) of one case, after checking that both sides read the
    same expanded ids."""
    reference = np.load(folder / "reference.npz")
    count, largest = 0, 0.0
    for k, (positions, expanded, log_probs) in enumerate(results):
        inputs, theirs = reference[f"inputs_{k}"], reference[f"log_probs_{k}"]
        if not (np.array_equal(inputs[: len(expanded)], expanded) and not inputs[len(expanded):].any()):
            sys.exit(f"{folder.name}, sequence {k}: the reference expands the actions otherwise:\n{inputs}\n{expanded}")
        largest = max(largest, float(np.abs(theirs[positions] - log_probs).max()))
        count += len(positions)
    return count, largest


def verdict(case, largest):
    """Whether the case agrees to float32 rounding, and whether that is what was expected of it."""
    if largest <= TOLERANCE:
        return "agrees" + (" (unexpected: " + case.by_design + ")" if case.by_design else "")
    return f"differs by design: {case.by_design}" if case.by_design else "DIFFERS"


def reference_settings(folder):
    """The reference's masking settings of a case, for the table."""
    config = json.loads((folder / "case.json").read_text())["reference_config"]
    rule = config.get("extra_attention_mask_name", "txl")
    if rule == "txl":
        return f"txl, L = M = {config['sequence_length']}"
    kwargs = config["extra_attention_mask_kwargs"]
    parts = [f"relative_pos={kwargs['relative_pos'] or 'none (shift)'}",
             f"gather_into_new_memory={kwargs['gather_into_new_memory']}"]
    if kwargs["use_different_attn_fns"]:
        parts.append("use_different_attn_fns=1")
    if config["num_unrestricted_heads"]:
        parts.append(f"num_unrestricted_heads={config['num_unrestricted_heads']}")
    if config["num_unrestricted_layers"]:
        parts.append(f"num_unrestricted_layers={config['num_unrestricted_layers']}")
    return ", ".join(parts) + f", L = M = {config['sequence_length']}"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reference", type=Path, required=True, help="checkout of the reference, extension built")
    parser.add_argument("--python", required=True, help="the Python of the reference's environment")
    parser.add_argument("--work", type=Path, help="where the two sides exchange files (default: a temporary folder)")
    add_markdown_option(parser)
    args = parser.parse_args()
    from hf_slm.families.action_vocab import ActionVocabulary

    sentences, documents = case_actions(test_documents())
    vocabulary = ActionVocabulary.from_action_sequences(sentences + documents)
    with tempfile.TemporaryDirectory() as temporary:
        work = args.work or Path(temporary)
        folders = [work / f"case{index:02d}" for index in range(len(CASES))]
        results = [hf_side(case, vocabulary, sentences, documents, folder) for case, folder in zip(CASES, folders)]
        versions = run_reference(args.python, args.reference.resolve(), work)
        rows = []
        for case, folder, result in zip(CASES, folders, results):
            count, largest = largest_difference(result, folder)
            rows.append([case.name, "documents" if case.documents else "sentences", reference_settings(folder),
                         str(count), f"{largest:.1e}", verdict(case, largest)])
    report = Report("hf-slm beside paper 000's reference implementation")
    report.line(f"Reference: {versions}. Models d {MODEL['hidden_size']}, {MODEL['num_attention_heads']} heads, "
                f"{MODEL['num_hidden_layers']} layers, d_ff {MODEL['intermediate_size']}, weights drawn with seed "
                f"{SEED}, float32 on the CPU. {len(SENTENCE_DOCUMENTS)} sentences and {len(DOCUMENTS)} documents of "
                f"{DOCUMENT_TREES} trees from the GUM sample's test split; documents in segments of "
                f"L = {SEGMENT_LENGTH} with M = {SEGMENT_LENGTH} memory slots. Compared: log p over the whole "
                "vocabulary at each action's output (sentences, the model's forward) and at every position of every "
                "segment (documents, COMPOSE copies too); Δ is the largest absolute difference in nats, agreement "
                f"meaning at most {TOLERANCE:.0e}. The reference's settings are fields of its configs/config_tg.py "
                "and config_txl.py.")
    report.table("", ["case", "level", "reference settings", "positions", "largest Δ log p", "verdict"], rows)
    report.finish(args.markdown)
    if any(row[-1] == "DIFFERS" or "unexpected" in row[-1] for row in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
