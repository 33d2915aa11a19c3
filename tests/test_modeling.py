"""The TG / TXL model: loss by hand, masks that restrict, fast == reference attention, hybrids, sizes."""

import math

import numpy as np
import pytest
import torch

from hf_slm.families.action_vocab import ActionVocabulary
from hf_slm.data.collator import SyntacticDataCollator
from hf_slm.modeling.backbone import PositionStructure
from hf_slm.families import all_presets, config_for_grammar, preset_config
from hf_slm.modeling.transformer_grammar_config import TransformerGrammarConfig
from hf_slm.families import get_grammar
from hf_slm.families import causal_lm_for_config
from hf_slm.modeling.modeling_slm import CACHE_FIELD
from hf_slm.modeling.transformer_grammar_model import TransformerGrammarModel

TREES = [
    "(S (NP the blue bird NP) (VP sings VP) S)",
    "(S (NP a dog NP) (VP barks (PP at (NP the moon NP) PP) VP) (ADVP loudly ADVP) S)",
    "(S (VP go VP) S)",
    "(NP (NP the end NP) (PP of (NP it NP) PP) NP)",
]
VOCAB = ActionVocabulary.from_action_sequences([t.split() for t in TREES])
LAYOUT = VOCAB.layout.to_dict()


def tiny_config(grammar="tg", **overrides):
    options = dict(
        vocab_size=len(VOCAB.tokens), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=32, grammar=grammar, max_sequence_length=128, **LAYOUT,
    )
    options.update(overrides)
    return config_for_grammar(**options)


def tiny_model(grammar="tg", seed=0, **overrides):
    torch.manual_seed(seed)
    model = causal_lm_for_config(tiny_config(grammar, **overrides)).eval()
    with torch.no_grad():  # non-zero biases so that every term of the formula matters
        for name, parameter in model.named_parameters():
            if name.endswith((".u", ".v", "bias")):
                parameter.normal_(0, 0.5)
    return model


def batch(grammar, trees=TREES):
    return SyntacticDataCollator(grammar, LAYOUT)([VOCAB.encode(t.split()) for t in trees])


# ---- the loss, by hand -----------------------------------------------------------------------------

def hand_forward(model, ids, mask, relpos):
    """A numpy transcription of the model for one sequence: explicit loops over attended positions."""
    cfg = model.config
    p = {name: value.detach().double().numpy() for name, value in model.state_dict().items()}
    d, heads = cfg.hidden_size, cfg.num_attention_heads
    dh = d // heads
    freqs = 10000.0 ** (-np.arange(0, d, 2) / d)

    def r(R):
        R = min(max(R, cfg.min_relative_position), cfg.max_relative_position)
        return np.concatenate([np.sin(R * freqs), np.cos(R * freqs)])

    def layer_norm(x, prefix):
        mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + cfg.layer_norm_eps) * p[prefix + ".weight"] + p[prefix + ".bias"]

    def activation(x):  # config.hidden_act, each written from its formula
        if cfg.hidden_act == "relu":
            return np.maximum(x, 0)
        if cfg.hidden_act == "gelu_pytorch_tanh":
            return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
        return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))

    h = p["model.decoder.embed_tokens.weight"][ids]
    n = len(ids)
    for k in range(cfg.num_hidden_layers):
        a = f"model.decoder.layers.{k}.attentions.0"
        q = h @ p[a + ".q_proj.weight"].T
        key = h @ p[a + ".k_proj.weight"].T
        val = h @ p[a + ".v_proj.weight"].T
        out = np.zeros((n, d))
        for head in range(heads):
            s = slice(head * dh, (head + 1) * dh)
            u, v = p[a + ".u"][head], p[a + ".v"][head]
            for i in range(n):
                attended = [j for j in range(n) if mask[i, j]]
                scores = []
                for j in attended:
                    wr = (p[a + ".r_proj.weight"] @ r(relpos[i, j]))[s]
                    scores.append(((q[i, s] + u) @ key[j, s] + (q[i, s] + v) @ wr) / math.sqrt(dh))
                weights = np.exp(np.array(scores) - max(scores))
                weights /= weights.sum()
                out[i, s] = sum(w * val[j, s] for w, j in zip(weights, attended))
        attn = out @ p[f"model.decoder.layers.{k}.o_projs.0.weight"].T + p[f"model.decoder.layers.{k}.o_projs.0.bias"]
        h = layer_norm(h + attn, f"model.decoder.layers.{k}.ln_attention")
        ffn = activation(h @ p[f"model.decoder.layers.{k}.ffn_in.weight"].T + p[f"model.decoder.layers.{k}.ffn_in.bias"])
        ffn = ffn @ p[f"model.decoder.layers.{k}.ffn_out.weight"].T + p[f"model.decoder.layers.{k}.ffn_out.bias"]
        h = layer_norm(h + ffn, f"model.decoder.layers.{k}.ln_ffn")
    return h @ p["model.decoder.embed_tokens.weight"].T + p["output_bias"]


@pytest.mark.parametrize("grammar,hidden_act", [("tg", "gelu"), ("choe_charniak", "gelu"), ("tg", "gelu_pytorch_tanh"),
                                                ("choe_charniak", "relu")])
def test_loss_equals_hand_computation(grammar, hidden_act):
    """The HF contract (labels=input_ids, shifted inside) and the collator's fast path both give the mean NLL
    of the predicted actions, computed here by hand over the grammar's positions (Algorithm 1's masks,
    relative positions and labels, tested against the paper's figure in test_grammars), with each feed-forward
    activation (issue 39: paper 000's reference uses the tanh approximation)."""
    model = tiny_model(grammar, hidden_act=hidden_act)
    sequences = [VOCAB.encode(t.split()) for t in TREES[:2]]
    rules = get_grammar(grammar, VOCAB.layout)
    total, count = 0.0, 0
    for ids in sequences:
        expanded = rules.sequence(ids)
        logits = hand_forward(model, expanded.input_ids, expanded.attention_mask, expanded.relative_positions)
        for i, label in enumerate(expanded.labels.tolist()):
            if label != -100:
                log_z = np.log(np.exp(logits[i] - logits[i].max()).sum()) + logits[i].max()
                total += log_z - logits[i, label]
                count += 1
    assert count == sum(len(ids) - 1 for ids in sequences)  # every action after <s> is predicted once
    width = max(len(ids) for ids in sequences)
    input_ids = torch.tensor([ids + [0] * (width - len(ids)) for ids in sequences])
    attention_mask = (input_ids != 0).long()
    contract = model(input_ids=input_ids, attention_mask=attention_mask, labels=input_ids).loss.item()
    collated = model(**batch(grammar, TREES[:2])).loss.item()
    assert contract == pytest.approx(total / count, rel=1e-5)
    assert collated == pytest.approx(total / count, rel=1e-5)


@pytest.mark.parametrize("grammar", ["tg", "choe_charniak", "terminals"])
def test_contract_and_collator_paths_give_identical_loss_and_gradients(grammar):
    # train mode (what Trainer runs) without dropout, so that the two paths can be compared
    model = tiny_model(grammar, num_unrestricted_heads=1, embedding_dropout=0.0, core_dropout=0.0, final_dropout=0.0).train()
    inputs = batch(grammar) if grammar != "terminals" else SyntacticDataCollator("terminals", LAYOUT)(
        [VOCAB.encode([w for w in t.split() if "(" not in w and ")" not in w], add_eos=True) for t in TREES])
    results = []
    for fast in (True, False):
        model.zero_grad()
        given = inputs if fast else {k: inputs[k] for k in ("input_ids", "attention_mask")}
        output = model(**given, labels=inputs["input_ids"]) if not fast else model(**given)
        output.loss.backward()
        results.append((output.loss.item(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}))
    assert results[0][0] == pytest.approx(results[1][0], rel=1e-6)
    assert results[0][1].keys() == results[1][1].keys() and results[0][1]
    for name, grad in results[0][1].items():
        assert torch.allclose(grad, results[1][1][name], atol=1e-6), name


def test_logits_at_t_predict_action_t_plus_1():
    """log p(x, y) from the shifted logits equals the sum, action by action, of one-step-longer prefixes."""
    model = tiny_model("tg")
    ids = VOCAB.encode(TREES[0].split())
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0]
        for t in range(1, len(ids)):
            prefix_logits = model(input_ids=torch.tensor([ids[:t]])).logits[0, -1]
            assert torch.allclose(logits[t - 1], prefix_logits, atol=1e-5)


def test_unknown_forward_inputs_are_rejected():
    model = tiny_model("tg")
    inputs = batch("tg", TREES[:1])
    with pytest.raises(TypeError, match=r"unexpected inputs \['relative_positions'\]"):
        model(**inputs, relative_positions=torch.zeros(1))
    with pytest.raises(ValueError, match="precomputed structure needs all"):
        model(input_ids=inputs["input_ids"], position_mask=inputs["position_mask"])
    with pytest.raises(ValueError, match="expected the \\[B, T\\] padding mask"):
        model(input_ids=inputs["input_ids"], attention_mask=inputs["position_mask"])


# ---- masks restrict --------------------------------------------------------------------------------

def reachable(mask, layers):
    """reach[i, j]: the output at i can depend on the input at j through `layers` attention layers."""
    reach = np.eye(len(mask), dtype=bool)
    for _ in range(layers):
        reach = (mask.astype(int) @ reach.astype(int)) > 0
    return reach


def test_tg_masks_really_restrict():
    tree = "(S (NP the blue bird NP) (VP sings (PP to (NP the moon NP) PP) VP) S)"
    other = tree.replace("blue", "the")  # same structure, another word at the same position
    vocab = ActionVocabulary.from_action_sequences([tree.split()])
    layout = vocab.layout.to_dict()
    outputs = {}
    for grammar in ("tg", "choe_charniak"):
        torch.manual_seed(0)
        config = tiny_config(grammar, vocab_size=len(vocab.tokens), **layout)
        model = causal_lm_for_config(config).eval()
        collate = SyntacticDataCollator(grammar, layout)
        a, b = collate([vocab.encode(tree.split())]), collate([vocab.encode(other.split())])
        positions_a = a["input_ids"].gather(1, a["expansion_index"])[0]
        positions_b = b["input_ids"].gather(1, b["expansion_index"])[0]
        changed = int((positions_a != positions_b).nonzero()[0])
        with torch.no_grad():  # per position: the last layer's hidden states
            hidden_a = model(**a, output_hidden_states=True).hidden_states[-1][0]
            hidden_b = model(**b, output_hidden_states=True).hidden_states[-1][0]
        difference = (hidden_a - hidden_b).abs().amax(-1)
        outputs[grammar] = (a["position_mask"][0].numpy(), changed, difference)
    mask, changed, difference = outputs["tg"]
    blind = ~reachable(mask, 2)[:, changed]
    assert blind.sum() >= 5  # e.g. `sings` and everything after the NP is composed, in a 2-layer model
    assert (difference[torch.from_numpy(blind)] == 0).all()
    assert (difference[torch.from_numpy(~blind)] > 0).all()
    _, changed_cc, difference_cc = outputs["choe_charniak"]
    assert (difference_cc[changed_cc:] > 0).all()  # causal: every later position sees the change


# ---- fast paths agree with the reference -----------------------------------------------------------

@pytest.mark.parametrize(
    "grammar, options",
    [
        ("tg", {}),
        ("tg", {"num_unrestricted_heads": 1}),
        ("tg", {"num_unrestricted_layers": 1}),
        ("tg", {"distinct_compose_attention": True}),
        ("tg", {"pre_layer_norm": True}),
        ("choe_charniak", {}),
        ("choe_charniak", {"num_unrestricted_heads": 1}),
        ("terminals", {}),
    ],
)
def test_fast_and_reference_attention_agree(grammar, options):
    model = tiny_model(grammar, **options)
    inputs = batch(grammar) if grammar != "terminals" else SyntacticDataCollator("terminals", LAYOUT)(
        [VOCAB.encode([w for w in t.split() if "(" not in w and ")" not in w], add_eos=True) for t in TREES])
    valid = inputs["attention_mask"].bool()
    results = {}
    for implementation in ("auto", "reference"):
        model.config.relative_attention = implementation
        model.zero_grad()
        output = model(**inputs)
        output.loss.backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        results[implementation] = (output.logits.detach(), grads)
    fast, reference = results["auto"], results["reference"]
    assert torch.allclose(fast[0][valid], reference[0][valid], atol=1e-5)
    assert fast[1].keys() == reference[1].keys()
    for name in fast[1]:
        assert torch.allclose(fast[1][name], reference[1][name], atol=1e-5), name
    # The grammar-derived structure (no mask passed) gives the same logits as the collator's.
    model.config.relative_attention = "auto"
    derived = model(input_ids=inputs["input_ids"]).logits.detach()
    assert torch.allclose(derived[valid], fast[0][valid], atol=1e-5)


def test_gathered_bias_path_agrees_when_coordinates_span_many_values():
    model = tiny_model("choe_charniak")
    long_tree = "(S " + " ".join(["the"] * 150) + " S)"
    inputs = SyntacticDataCollator("choe_charniak", LAYOUT)([VOCAB.encode(long_tree.split())])
    model.config.max_sequence_length = 256
    fast = model(**inputs).logits
    model.config.relative_attention = "reference"
    assert torch.allclose(fast, model(**inputs).logits, atol=1e-5)


def test_relative_table_covers_the_sequence_not_the_configured_maximum(monkeypatch):
    """A causal model configured for 1024 positions projects r(R) for about T distances, not 1024, and the
    per-forward work (chunk plans, the relative-shift check) is done once per forward call, not per layer."""
    from hf_slm.modeling import backbone

    model = tiny_model("choe_charniak", max_sequence_length=1024, num_hidden_layers=3, num_unrestricted_heads=1)
    rows = []
    for layer in model.model.decoder.layers:
        for attention in layer.attention_modules():
            attention.r_proj.register_forward_hook(lambda module, args, output: rows.append(args[0].shape[0]))
    plans = []
    original = backbone.chunk_plan
    monkeypatch.setattr(backbone, "chunk_plan", lambda *args: plans.append(1) or original(*args))
    inputs = batch("choe_charniak")
    with torch.no_grad():
        model(**inputs)
    length = inputs["position_mask"].shape[1]
    assert len(rows) == 6 and max(rows) <= length + 17  # T + the shift's margin, rounded up to 16
    assert len(plans) == 2  # restricted and unrestricted heads, shared by the 3 layers


def test_all_unrestricted_tg_equals_causal_model():
    """TG whose layers are all unrestricted == a plain causal-mask model on the same input and relpos."""
    tg = tiny_model("tg", num_unrestricted_layers=2)
    causal = tiny_model("choe_charniak")
    state = {}
    for name, value in tg.state_dict().items():
        state[name.replace("unrestricted_attention", "attentions.0")] = value
    causal.load_state_dict(state)
    inputs = batch("tg")
    position_ids = inputs["input_ids"].gather(1, inputs["expansion_index"])
    kinds = inputs["position_kinds"]
    n = position_ids.shape[1]
    positions = torch.where(kinds != 0, torch.arange(n)[None], torch.full_like(kinds, -1))
    tg_structure = PositionStructure(inputs["position_mask"], inputs["position_coordinates"], positions, kinds, -1)
    causal_structure = PositionStructure(torch.zeros(len(TREES), n, n, dtype=torch.bool), positions.clamp(min=0),
                                         positions, None, 0)
    causal_structure.mask = causal_structure.causal_mask()
    valid = kinds != 0
    with torch.no_grad():
        expected = causal.forward_positions(position_ids, causal_structure)
        assert torch.allclose(tg.forward_positions(position_ids, tg_structure)[valid], expected[valid], atol=1e-5)


def test_cache_gives_the_same_logits_as_one_pass():
    """TG positions fed in two calls with a KV cache (as the beam search does) equal one pass."""
    model = tiny_model("tg")
    inputs = batch("tg", TREES[:1])
    position_ids = inputs["input_ids"].gather(1, inputs["expansion_index"])
    n = position_ids.shape[1]
    positions = torch.arange(n)[None]
    mask, coordinates, kinds = inputs["position_mask"], inputs["position_coordinates"], inputs["position_kinds"]
    with torch.no_grad():
        full = model.forward_positions(position_ids, PositionStructure(mask, coordinates, positions, kinds, -1))
        from transformers import DynamicCache

        cache, split = DynamicCache(), 7
        first = model.forward_positions(position_ids[:, :split], PositionStructure(
            mask[:, :split, :split], coordinates[:, :split], positions[:, :split], kinds[:, :split], -1), cache)
        second = model.forward_positions(position_ids[:, split:], PositionStructure(
            mask[:, split:], coordinates, positions, kinds[:, split:], -1), cache)
    assert torch.allclose(torch.cat([first, second], dim=1), full, atol=1e-5)


@pytest.mark.parametrize("cache_name", ["cache", "past_key_values"])
@pytest.mark.parametrize("grammar", ["choe_charniak", "terminals"])
def test_causal_models_extend_a_cache_from_action_ids(grammar, cache_name):
    """The HF contract with a KV cache (what transformers' generate does), left padding included; the cache
    goes in under either name (transformers >= 5.24 passes `cache`, earlier versions `past_key_values`)."""
    model = tiny_model(grammar)
    ids = VOCAB.encode(TREES[1].split()) if grammar != "terminals" else VOCAB.encode(["a", "dog", "barks"], add_eos=True)
    short = ids[:5]
    width = len(ids)
    input_ids = torch.tensor([ids, [0] * (width - len(short)) + short])  # second row left-padded
    attention_mask = (torch.arange(width)[None] >= torch.tensor([[0], [width - len(short)]])).long()
    with torch.no_grad():
        full = model(input_ids=input_ids, attention_mask=attention_mask).logits
        split = width - 3  # every row has a real action in the first call, as in generation
        first = model(input_ids=input_ids[:, :split], attention_mask=attention_mask[:, :split], use_cache=True)
        second = model(input_ids=input_ids[:, split:], attention_mask=attention_mask,
                       **{cache_name: getattr(first, CACHE_FIELD)}, use_cache=True)
    real = attention_mask.bool()
    assert torch.allclose(torch.cat([first.logits, second.logits], dim=1)[real], full[real], atol=1e-5)
    alone = model(input_ids=torch.tensor([short])).logits[0]
    assert torch.allclose(full[1, real[1]], alone, atol=1e-5)


def test_tg_refuses_a_cache_from_action_ids():
    model = tiny_model("tg")
    ids = torch.tensor([VOCAB.encode(TREES[0].split())])
    first = model(input_ids=ids[:, :3], use_cache=True)
    with pytest.raises(ValueError, match="cached decoding goes through model.generate"):
        model(input_ids=ids[:, 3:], past_key_values=getattr(first, CACHE_FIELD), use_cache=True)


# ---- sizes and errors ------------------------------------------------------------------------------

def parameter_count(config):
    with torch.device("meta"):
        model = causal_lm_for_config(config)
    return sum(p.numel() for p in model.parameters())


def test_tg_bllip_parameter_count():
    # The reference implementation counts 251,887,616: per layer W_q, W_k, W_v, W_R, W_o (d x d each, no
    # bias but W_o's), u and v, the GELU block with both biases, two LayerNorms; tied embeddings plus an
    # output bias; no final LayerNorm (post-LN).
    assert parameter_count(preset_config("tg-bllip")) == 251_887_616
    assert parameter_count(preset_config("txl-cc-bllip")) == 251_887_616


def test_presets_are_complete():
    compositional = {f"{name}{size}" for name in ("bi-dn-in-m", "bi-dn-in-nm", "bi-up-in-m", "bi-up-in-nm", "nb-dn-in-m",
                                                  "nb-dn-in-nm", "bi-dn-ex-m", "bi-dn-ex-nm", "bi-up-ex-m", "bi-up-ex-nm",
                                                  "nb-dn-ex-m", "nb-dn-ex-nm", "nb-up-in-m", "nb-up-in-nm", "nb-up-ex-m",
                                                  "nb-up-ex-nm", "gpt2-token", "gpt2-tree")
                     for size in ("", "-tiny")}
    assert {name for name, (family, _) in all_presets().items() if family.grammars} == {"tg-ptb", "txl-cc-ptb", "txl-terminals-ptb", "tg-bllip", "txl-cc-bllip", "txl-terminals-bllip",
                            "tg-txl-positions-ptb", "tg-txl-positions-bllip", "tg-tiny", "txl-cc-tiny", "txl-terminals-tiny", "dtg-ptb", "dtg-bllip", "dtg-tiny", "txl-trans-ptb", "txl-trans-bllip", "txl-trans-tiny",
                            "rnng-ptb", "rnng-tiny", *compositional}
    ptb = parameter_count(preset_config("tg-ptb"))
    assert 11e6 < ptb < 13e6  # "16-layer models with 12M parameters" (paper 000, section 3)
    with pytest.raises(ValueError, match="unknown preset 'tg-wsj'"):
        preset_config("tg-wsj")
    with pytest.raises(ValueError, match="unknown grammar 'urnng'"):
        config_for_grammar("urnng")
    with pytest.raises(ValueError, match="TransformerGrammarConfig does not take grammar 'terminals'.*TransformerXLConfig"):
        TransformerGrammarConfig(grammar="terminals")


def test_input_longer_than_maximum_is_an_error():
    model = tiny_model("tg", max_sequence_length=10)
    with pytest.raises(ValueError, match="longer than the model's maximum of 10"):
        model(**batch("tg", TREES[:1]))


def test_base_model_returns_hidden_states():
    model = tiny_model("tg")
    base = TransformerGrammarModel(model.config)
    base.load_state_dict({k[len("model."):]: v for k, v in model.state_dict().items() if k.startswith("model.")})
    inputs = batch("tg")
    hidden = base.eval()(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"]).last_hidden_state
    assert hidden.shape == (*inputs["input_ids"].shape, 16)  # one per action, not per expanded position
    expected = model(**inputs).logits
    real = inputs["attention_mask"].bool()
    assert torch.allclose((hidden @ model.lm_head.weight.T + model.output_bias)[real], expected[real], atol=1e-5)
