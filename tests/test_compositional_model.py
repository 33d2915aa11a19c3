"""Paper 003's compositional SLMs as models (CompositionalSLMConfig / ...ForCausalLM, CompositionalTokenizer): all
sixteen variants and the GPT2-token / GPT2-tree baselines train and parse (saving, pushing and loading without
hf-slm: tests/test_families.py, for a variant of each kind of composition); the external composer batched by level;
Nb-Up's start pointer (section 2.2) trained, cached and searched; the tokenizer's trees, errors and word pieces."""


import pytest
import torch
from nltk import Tree

import hf_slm
from hf_slm.data.collator import SyntacticDataCollator
from hf_slm.families import config_for_grammar, preset_config, presets
from hf_slm.modeling.compositional_config import COMPOSITIONAL_MODEL_VARIANTS, CompositionalSLMConfig
from hf_slm.modeling.compositional_grammars import COMPOSITIONAL_GRAMMAR_NAMES
from hf_slm.families import get_grammar
from hf_slm.modeling.grammars import ActionLayout
from hf_slm.families import causal_lm_for_config
from hf_slm.modeling.search_constraints import SearchConstraints
from hf_slm.tokenization.tokenization_compositional import CompositionalTokenizer
from hf_slm.tokenization.linearizers import bottom_up_actions, bottom_up_pointers
from hf_slm.tokenization.trees import left_binarize, left_binarize_shape, parse_tree, remove_unary_chains
from helpers.compositional_models import LABELED, linearization_of, tiny

MODELS = COMPOSITIONAL_MODEL_VARIANTS + ("gpt2-token", "gpt2-tree")
SENTENCE = ["the", "dog", "sings"]


def unlabeled_trees(tokenizer):
    return [tokenizer.unlabel(tree) for tree in LABELED]


@pytest.mark.parametrize("grammar", MODELS)
def test_a_variant_trains_and_parses(grammar, tmp_path, one_thread):
    from datasets import Dataset
    from transformers import Trainer, TrainingArguments

    # Whole words as pieces: a trained tiny Bi-Dn model's beam of 20 can fill with hypotheses that opened more
    # brackets than the words left can close (words of several pieces: the exhaustive test below).
    model, tokenizer = tiny(grammar, vocab_size=30, sentencepiece_options={"model_type": "word"})
    trees = unlabeled_trees(tokenizer)
    collator = SyntacticDataCollator(grammar, tokenizer.action_layout)
    encoded = tokenizer(trees)  # Nb-Up: input_ids and constituent_starts
    columns = {name: encoded[name] for name in ("input_ids", "constituent_starts") if name in encoded}
    features = [dict(zip(columns, values)) for values in zip(*columns.values())]
    contract = tokenizer(trees, padding=True, return_tensors="pt")
    with torch.no_grad():  # the collator's fast path and the HF contract: one loss
        before = float(model(**collator(features)).loss)
        assert before == pytest.approx(float(model(**contract, labels=contract["input_ids"]).loss), abs=1e-5)
    composer = None if model.model.composer is None else [p.detach().clone() for p in model.model.composer.parameters()]
    args = TrainingArguments(output_dir=str(tmp_path / "run"), per_device_train_batch_size=3, max_steps=12,
                             learning_rate=3e-2, logging_steps=100, save_strategy="no", report_to=[], disable_tqdm=True,
                             use_cpu=True)
    Trainer(model=model, args=args, train_dataset=Dataset.from_dict({name: value * 4 for name, value in columns.items()}),
            data_collator=collator).train()
    model.eval()
    with torch.no_grad():
        after = model(**contract, labels=contract["input_ids"])
    assert float(after.loss) < before * 0.8
    if composer is not None:  # the loss reaches the composer through the `)` positions' inputs
        assert all(not torch.equal(old, new) for old, new in zip(composer, model.model.composer.parameters()))
    if "nb-up" in grammar:  # the start pointer learns with the rest
        assert float(after.start_loss) > 0
        assert torch.isfinite(after.start_log_probs).any()
    if grammar == "gpt2-token":
        return
    best = hf_slm.score(model, tokenizer, [SENTENCE], beam_size=20, word_beam_size=5, progress=False)[0]
    parsed = parse_tree(best["tree"].replace("( ", "(X "))  # a tree over the given words, in order
    assert parsed.leaves() == SENTENCE
    if grammar.startswith("bi-"):
        assert all(len(node) == 2 for node in parsed.subtrees())


@pytest.mark.parametrize("grammar", ["bi-dn-in-m", "bi-up-in-nm", "nb-dn-in-nm", "gpt2-tree"])
def test_an_exhaustive_beam_sums_every_tree_the_search_allows(grammar, one_thread):
    """log p(x) from an exhaustive beam is the sum of p(x, y), each y scored by a plain forward pass, over every
    tree the search may build: Bi, both binary trees over the three words, each word of several pieces its own
    left-binarized constituent (the search keeps it so: it reads back as one word); Nb with n_c = 1, the one
    constituent over them. The KV-cache decoder equals re-encoding."""
    model, tokenizer = tiny(grammar, vocab_size=30)
    words = ["a", "dog", "barks"]
    assert len(tokenizer("dog", is_split_into_words=True, add_special_tokens=False)["input_ids"]) >= 3
    if grammar.startswith("bi-"):
        sequences = [tokenizer(tree)["input_ids"] for tree in ("( ( a dog ) barks )", "( a ( dog barks ) )")]
        options = dict(max_nonterminals_per_word=8.0)
    else:
        sequences = [tokenizer("( a dog barks )")["input_ids"]]
        options = dict(max_nonterminals=1)
    with torch.no_grad():
        joint = torch.tensor([float(model(input_ids=torch.tensor([ids])).logits[0, :-1].log_softmax(-1)
                                    .gather(1, torch.tensor(ids[1:])[:, None]).sum()) for ids in sequences],
                             dtype=torch.float64)
    search = dict(beam_size=500, word_beam_size=500, fast_track=0, max_consecutive_open=None, progress=False, **options)
    cached = hf_slm.score(model, tokenizer, [words], **search)[0]
    assert cached["log_prob"] == pytest.approx(float(torch.logsumexp(joint, 0)), abs=1e-4)
    reencoded = hf_slm.score(model, tokenizer, [words], use_cache=False, **search)[0]
    assert reencoded["log_prob"] == pytest.approx(cached["log_prob"], abs=1e-5)


def test_bi_trees_over_pieces_stay_reachable_by_the_search():
    """A Bi tree brackets the pieces of a long word (`( ( ▁ d ) o ) g )`): the search lets brackets come between
    them, so every gold tree of the training trees is reachable under the default constraints (before, a word of
    three pieces made its Bi-Dn tree unreachable)."""
    for grammar in ("bi-dn-in-m", "bi-up-in-m"):
        tokenizer = CompositionalTokenizer.train(LABELED, vocab_size=30, linearization=linearization_of(grammar))
        rules = get_grammar(grammar, ActionLayout(**tokenizer.action_layout))
        constraints = SearchConstraints(rules, tokenizer.word_start_mask, (), max_nonterminals_per_word=16.0,
                                        max_consecutive_open=None)
        longest = 0
        for tree in unlabeled_trees(tokenizer):
            encoded = tokenizer(tree, return_word_starts=True)
            words = []
            for piece, starts in zip(encoded["input_ids"], encoded["word_starts"]):
                if rules.layout.kind(piece) == hf_slm.ActionKind.TERMINAL:
                    words.append([piece]) if starts or not words else words[-1].append(piece)
            longest = max(longest, max(len(word) for word in words))
            rules.validate(encoded["input_ids"])
            assert constraints.reachable(encoded["input_ids"], words), (grammar, tree)
        assert longest >= 3  # the case that needs brackets between pieces


# ---- the tokenizer -----------------------------------------------------------------------------------------


def test_the_tokenizer_writes_each_linearization_and_decodes_it_back():
    expected = {
        "nb-dn": "<s> ( Write ( an essay ) quickly )",
        "bi-dn": "<s> ( ( Write ( an essay ) ) quickly )",
        "bi-up": "<s> Write an essay ) ) quickly ) </s>",
        "terminals": "<s> Write an essay quickly </s>",
    }
    words = ["Write", "an", "essay", "quickly"]
    for linearization, actions in expected.items():
        # a vocabulary that spells each word as one piece, so the ids read as Figure 1's actions
        tokenizer = CompositionalTokenizer.train([LABELED[2]], vocab_size=10, linearization=linearization,
                                                 sentencepiece_options={"model_type": "word"})
        tree = tokenizer.unlabel(LABELED[2])
        assert tree == "( ( Write ( an essay ) ( quickly ) ) )"  # labels, POS tags and the root wrapper gone
        ids = tokenizer(tree)["input_ids"]
        assert tokenizer.convert_ids_to_tokens(ids) == [
            "\u2581" + token if token in words else token for token in actions.split()]
        decoded = tokenizer.decode(ids, skip_special_tokens=True)
        assert decoded == (" ".join(words) if linearization == "terminals" else
                           {"nb-dn": "( Write ( an essay ) quickly )"}.get(linearization, "( ( Write ( an essay ) ) quickly )"))
        if linearization != "terminals":
            assert tokenizer(decoded)["input_ids"] == ids
            assert tokenizer.encode_actions(actions)["input_ids"] == ids
        figure_1 = Tree("", [Tree("", ["Write", Tree("", ["an", "essay"]), Tree("", ["quickly"])])])
        assert tokenizer(figure_1)["input_ids"] == ids


def test_the_nb_up_tokenizer_gives_each_closing_bracket_its_start_and_reads_trees_back_with_them():
    """Figure 1's Nb-Up example, `<s> Write an essay ) quickly ) </s>`: the first `)` starts at `an` (2), the second at
    `Write` (1); a constituent that begins with a constituent points at that one's `)` (C_k holds it, not its first
    word), as linearizers.bottom_up_pointers says; padding fills -1 on either side; decoding needs the starts."""
    tokenizer = CompositionalTokenizer.train([LABELED[2], "(S (NP a dog) (VP barks))"], vocab_size=12,
                                             linearization="nb-up", sentencepiece_options={"model_type": "word"})
    figure_1 = tokenizer("( Write ( an essay ) quickly )")
    assert tokenizer.convert_ids_to_tokens(figure_1["input_ids"]) == \
        ["<s>", "\u2581Write", "\u2581an", "\u2581essay", ")", "\u2581quickly", ")", "</s>"]
    assert figure_1["constituent_starts"] == [-1, -1, -1, -1, 2, -1, 1, -1]
    nested = "( ( a dog ) barks )"
    encoded = tokenizer(nested)
    assert encoded["constituent_starts"] == [-1, -1, -1, 1, -1, 3, -1]
    actions, first_actions = bottom_up_actions(parse_tree(nested.replace("( ", "(X ")))
    assert [-1] + [-1 if p is None else p + 1 for p in bottom_up_pointers(actions, first_actions)] + [-1] == \
        encoded["constituent_starts"]
    assert tokenizer.decode(encoded["input_ids"], starts=encoded["constituent_starts"], skip_special_tokens=True) == nested
    assert tokenizer.decode(encoded["input_ids"], skip_special_tokens=True) == "a dog ) barks )"  # no starts: the actions, not a guessed tree
    for side in ("right", "left"):
        batch = tokenizer(["( Write ( an essay ) quickly )", nested], padding=True, padding_side=side)
        pad = [-1] * (len(figure_1["input_ids"]) - len(encoded["input_ids"]))
        assert batch["constituent_starts"][1] == (encoded["constituent_starts"] + pad if side == "right" else
                                                  pad + encoded["constituent_starts"])
    assert "constituent_starts" not in CompositionalTokenizer.train([LABELED[2]], vocab_size=10, linearization="bi-up",
                                                                    sentencepiece_options={"model_type": "word"})(nested)


def test_nb_up_actions_encode_with_their_written_starts_as_the_tree_does():
    """encode_actions takes a nb-up `)`'s start as the index of the first item it closes in the actions as written
    (linearizers.bottom_up_pointers), and gives the ids and constituent_starts that tokenizer(tree) gives, words of
    several pieces included; a start that is no item on the stack, or missing starts, are ValueErrors."""
    tokenizer = CompositionalTokenizer.train(LABELED, vocab_size=40, linearization="nb-up")
    for text in unlabeled_trees(tokenizer) + ["( ( a dog ) barks )"]:
        tree = remove_unary_chains(parse_tree(text.replace("( ", "(X ")))
        actions, first_actions = bottom_up_actions(tree)
        written = [p for p, a in zip(bottom_up_pointers(actions, first_actions), actions) if a == ")"]
        encoded = tokenizer.encode_actions(actions + ["</s>"], starts=written)
        expected = tokenizer(text)
        assert encoded["input_ids"] == expected["input_ids"], text
        assert encoded["constituent_starts"] == expected["constituent_starts"], text
        assert len(expected["input_ids"]) > len(actions) + 2 or text == "( ( a dog ) barks )"  # pieces were split
    as_tensors = tokenizer.encode_actions("a dog ) barks )", starts=[0, 2], return_tensors="pt")
    assert as_tensors["constituent_starts"].tolist() == [tokenizer("( ( a dog ) barks )")["constituent_starts"][:-1]]
    with pytest.raises(ValueError, match=r"action 4 \(`\)`\) starts at 0, which is no item on the stack \[2, 3\]"):
        tokenizer.encode_actions("a dog ) barks )", starts=[0, 0])  # `a` is inside the first `)`
    with pytest.raises(ValueError, match=r"nb-up actions with 2 `\)` got 1 starts"):
        tokenizer.encode_actions("a dog ) barks )", starts=[0])
    with pytest.raises(ValueError, match=r"starts= is for nb-up actions"):
        CompositionalTokenizer.train(LABELED, vocab_size=40, linearization="bi-up").encode_actions("a dog )", starts=[0])


def test_bi_words_of_several_pieces_are_their_own_binary_constituents():
    tokenizer = CompositionalTokenizer.train(LABELED, vocab_size=30, linearization="bi-dn")
    p = tokenizer.convert_ids_to_tokens(tokenizer("dog", is_split_into_words=True, add_special_tokens=False)["input_ids"])
    assert len(p) >= 3
    closing = [token for piece in p[1:] for token in (piece, ")")]  # left-binarized: ((p1 p2) p3) ...
    encoded = tokenizer("( a dog )", return_word_starts=True)
    assert tokenizer.convert_ids_to_tokens(encoded["input_ids"]) == ["<s>", "(", "\u2581a", *["("] * (len(p) - 1), p[0],
                                                                   *closing, ")"]
    assert [i for i, start in enumerate(encoded["word_starts"]) if start] == [2, 2 + len(p)]
    assert tokenizer.decode(encoded["input_ids"], skip_special_tokens=True) == "( a dog )"
    up = CompositionalTokenizer.train(LABELED, vocab_size=30, linearization="bi-up")
    assert up.convert_ids_to_tokens(up("( a dog )")["input_ids"]) == ["<s>", "\u2581a", p[0], *closing, ")", "</s>"]
    # one word of several pieces: its own constituent is the root
    assert up.convert_ids_to_tokens(up("( dog )")["input_ids"]) == ["<s>", p[0], *closing, "</s>"]
    assert up.decode(up("( dog )")["input_ids"], skip_special_tokens=True) == "( dog )"


def test_the_tokenizer_refuses_labeled_trees_and_non_binary_actions():
    tokenizer = CompositionalTokenizer.train(LABELED, vocab_size=40, linearization="bi-dn")
    with pytest.raises(ValueError, match=r"is a labeled tree.*tokenizer\.unlabel\(tree\)"):
        tokenizer(LABELED[0])
    with pytest.raises(ValueError, match=r"labels \['NP', 'S'\].*tokenizer\.unlabel"):
        tokenizer(Tree("S", [Tree("NP", ["the", "bird"]), "sings"]))
    with pytest.raises(ValueError, match=r"action 4 \('\)'\) closes a constituent of 3 item\(s\): a bi-dn tokenizer "
                                         r"reads binary trees"):
        tokenizer.encode_actions("( the blue bird ) )")
    up = CompositionalTokenizer.train(LABELED, vocab_size=40, linearization="nb-up")  # no longer refused
    with pytest.raises(ValueError, match=r"nb-up actions with 1 `\)` got no starts: a nb-up `\)` does not say where"):
        up.encode_actions("the blue bird ) </s>")
    nb = CompositionalTokenizer.train(LABELED, vocab_size=40, linearization="nb-dn")
    assert nb.encode_actions("( the blue bird )")["input_ids"] == nb("( the blue bird )")["input_ids"]
    model, _ = tiny("bi-dn-in-m")
    with pytest.raises(ValueError, match="action 4 .* not allowed here .the constituent has its two children: a binary tree closes it now"):
        model(input_ids=torch.tensor([nb("( the blue bird )")["input_ids"]]))


def test_left_binarize_shape_is_nltks_without_nltk():
    for text in LABELED + ["(S (A a) (B b) (C c) (D d) (E (F f) (G g) (H h)))"]:
        tree = parse_tree(text)
        assert str(_unlabel(left_binarize(tree))) == str(_unlabel(left_binarize_shape(tree)))


def _unlabel(tree):
    return Tree("", [_unlabel(child) for child in tree]) if isinstance(tree, Tree) else tree


# ---- the config, presets and fast paths ----------------------------------------------------------------------


def test_the_config_takes_every_variant_and_refuses_unknown_ones():
    with pytest.raises(ValueError, match=r"CompositionalSLMConfig does not take grammar 'bi-down-in-m'; expected one of "
                                         r"\['nb-dn-in-m', 'bi-dn-in-m'"):
        CompositionalSLMConfig(grammar="bi-down-in-m")
    assert set(COMPOSITIONAL_GRAMMAR_NAMES) <= set(MODELS)
    for name in COMPOSITIONAL_GRAMMAR_NAMES:
        assert CompositionalSLMConfig(grammar=name).position_encoding == "absolute"
    # The pointer reads the final layer's first two heads (section 2.2).
    with pytest.raises(ValueError, match="num_attention_heads must be at least 2, got 1"):
        config_for_grammar("nb-up-in-m", hidden_size=16, num_attention_heads=1)
    assert config_for_grammar("bi-up-in-m", document_level=True).document_level  # `</s>` ends each sentence


def test_presets_follow_paper_003():
    for name in MODELS:
        assert preset_config(name).grammar == name and preset_config(f"{name}-tiny").grammar == name
    with torch.device("meta"):
        small = sum(p.numel() for p in causal_lm_for_config(preset_config("gpt2-token")).parameters())
    config = preset_config("bi-up-in-m")
    assert (config.hidden_size, config.num_hidden_layers, config.num_attention_heads) == (768, 12, 12)
    assert config.position_encoding == "absolute" and config.max_sequence_length == 2048
    # GPT-2 small's 124M parameters with our SentencePiece vocabulary of the same size and an output bias
    assert 123e6 < small < 126e6, small
    assert presets()["bi-up-in-m"]["training"]["learning_rate"] == 5e-5
    # Ex: the paper's composer (256-d, 4 layers) beside GPT-2 small, about 5% more parameters (section 3)
    ex = preset_config("bi-up-ex-nm", close_nt_start=4, close_nt_stop=5)  # a tokenizer's one `)` id
    assert (ex.composer_hidden_size, ex.composer_num_layers) == (256, 4)
    with torch.device("meta"):
        model = causal_lm_for_config(ex)
    added = sum(p.numel() for p in model.model.composer.parameters())
    assert 0.02 < added / small < 0.06, added / small
    tiny_ex = preset_config("bi-up-ex-nm-tiny")
    assert tiny_ex.composer_hidden_size < tiny_ex.hidden_size


def test_the_baselines_use_the_causal_fast_path():
    for grammar in ("gpt2-tree", "gpt2-token"):
        model, tokenizer = tiny(grammar)
        assert model.grammar.causal
        contract = tokenizer(unlabeled_trees(tokenizer), padding=True, return_tensors="pt")
        structure = model.model.positions_of_actions(contract["input_ids"], contract["attention_mask"]).structure
        lengths = contract["attention_mask"].sum(1)
        for row, length in enumerate(lengths.tolist()):
            assert torch.equal(structure.mask[row, :length, :length], torch.ones(length, length).tril().bool())


# ---- the external composer (Ex) --------------------------------------------------------------------------


@pytest.mark.parametrize("grammar", ["bi-up-ex-m", "nb-dn-ex-nm"])
def test_compositions_batched_by_level_equal_composing_one_constituent_at_a_time(grammar, one_thread):
    """Training composes every constituent of a batch bottom-up, one composer call per tree level; composing the
    constituents one by one, in sequence order (children before parents), gives the same input embeddings."""
    model, tokenizer = tiny(grammar)
    trees = unlabeled_trees(tokenizer)
    batch = SyntacticDataCollator(grammar, tokenizer.action_layout)(tokenizer(trees)["input_ids"])
    position_ids = batch["input_ids"].gather(1, batch["expansion_index"])
    children, level = batch["composition_children"], batch["composition_level"]
    composer = model.model.composer
    calls = []
    compose_packed = composer.compose_packed
    # compose_packed(children, which, rank, count): count is the number of constituents composed in the call
    composer.compose_packed = lambda *arguments: calls.append(arguments[3]) or compose_packed(*arguments)
    with torch.no_grad():
        tokens = model.model.decoder.embed_tokens(position_ids)
        batched = composer.compose_by_level(tokens, children, level)
        del composer.compose_packed
        one_by_one = tokens.clone()
        constituents = 0
        for b in range(len(position_ids)):
            for t in range(position_ids.shape[1]):
                if level[b, t] > 0:
                    kids = children[b, t].nonzero()[:, 0]
                    one_by_one[b, t] = composer.compose(one_by_one[b, kids][None], torch.ones(1, len(kids), dtype=torch.bool))[0]
                    constituents += 1
    assert torch.allclose(batched, one_by_one, atol=1e-5)  # float sums over different batch shapes
    composed = level > 0
    assert constituents == int(composed.sum()) and len(calls) == int(level.max()) < constituents
    assert sum(calls) == constituents
    assert torch.equal(batched[~composed], tokens[~composed])
    assert not torch.allclose(batched[composed], tokens[composed])  # a `)` inputs its composition, not its token
    if grammar.startswith("nb-"):  # constituents of different sizes share a call: the padding is masked
        sizes = children.sum(-1)[composed]
        assert len(set(sizes.tolist())) > 1


def test_packed_composition_equals_the_padded_computation(one_thread):
    """The composer runs its layers on the real rows only (summaries + children, packed) and pads only inside
    the attention; that is the padded computation (every constituent padded to the widest, padding masked as
    keys, all rows through every layer) to float rounding, outputs and gradients alike."""
    model, _ = tiny("nb-dn-ex-m")
    composer = model.model.composer
    composer.eval()  # no dropout: the two computations draw different masks
    sizes = torch.tensor([1, 6, 3, 2, 6, 4])
    mask = torch.arange(6)[None] < sizes[:, None]
    children = torch.randn(len(sizes), 6, model.config.hidden_size, generator=torch.Generator().manual_seed(0))

    def padded(inputs):
        count, most, _ = inputs.shape
        hidden = composer.down(inputs) + composer.child_positions(torch.arange(most))[None]
        hidden = torch.cat([composer.summary.expand(count, 1, -1), hidden], dim=1)
        keep = torch.cat([mask.new_ones(count, 1), mask], dim=1)[:, None, None, :]
        for layer in composer.layers:
            hidden = layer(hidden, keep)
        return composer.up(composer.final_layer_norm(hidden[:, 0]))

    results = []
    for compose in (padded, lambda inputs: composer.compose(inputs, mask)):
        inputs = children.clone().requires_grad_()
        out = compose(inputs)
        (out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum().backward()
        results.append((out.detach(), inputs.grad, [parameter.grad.clone() for parameter in composer.parameters()]))
        composer.zero_grad(set_to_none=True)
    (reference, reference_input, reference_parameters), (packed, packed_input, packed_parameters) = results
    assert torch.allclose(packed, reference, atol=1e-5)
    assert torch.allclose(packed_input, reference_input, atol=1e-5)
    assert torch.equal(packed_input[~mask], torch.zeros_like(packed_input[~mask]))  # padding is never read
    for new, old in zip(packed_parameters, reference_parameters):  # sums of many terms: rounding scales with them
        assert torch.allclose(new, old, atol=1e-5 * max(1.0, float(old.abs().max())))
    # a constituent's composition does not depend on what shares its call
    assert torch.allclose(composer.compose(children[1:2], mask[1:2]), packed[1:2], atol=1e-5)


def test_ex_nm_is_causal_and_composes_under_either_padding_side(one_thread):
    """Ex + Nm takes the causal fast path (paper 003, section 3.4) and still composes: left and right padding give
    the same logits, and those differ from a model whose `)` inputs only its token."""
    model, tokenizer = tiny("bi-up-ex-nm")
    assert model.grammar.causal
    rows = [tokenizer(tree)["input_ids"] for tree in unlabeled_trees(tokenizer)]
    width = max(len(row) for row in rows)
    pad = tokenizer.pad_token_id
    right = torch.tensor([row + [pad] * (width - len(row)) for row in rows])
    left = torch.tensor([[pad] * (width - len(row)) + row for row in rows])
    real_right, real_left = right != pad, left != pad
    with torch.no_grad():
        structure = model.model.positions_of_actions(right, real_right.long()).structure
        for row, length in enumerate(real_right.sum(1).tolist()):
            assert torch.equal(structure.mask[row, :length, :length], torch.ones(length, length).tril().bool())
        from_right = model(input_ids=right, attention_mask=real_right.long()).logits
        from_left = model(input_ids=left, attention_mask=real_left.long()).logits
        assert torch.allclose(from_right[real_right], from_left[real_left], atol=1e-5)
        composer, model.model.composer = model.model.composer, None
        plain = model(input_ids=right, attention_mask=real_right.long()).logits
        model.model.composer = composer
    assert not torch.allclose(plain[real_right], from_right[real_right], atol=1e-3)


@pytest.mark.parametrize("grammar", ["bi-up-ex-m", "bi-dn-ex-nm"])
def test_ex_beam_search_with_cache_equals_reencoding(grammar, one_thread):
    """The KV-cache decoder composes each chosen `)` from the input embeddings it keeps (all of a round's in one
    composer call): its beam equals re-encoding every prefix from action ids, and the best tree's score equals a
    plain forward pass over it."""
    model, tokenizer = tiny(grammar, vocab_size=30)
    words = ["a", "dog", "barks", "at", "the", "moon"]
    search = dict(beam_size=12, word_beam_size=4, progress=False)
    calls = []  # compositions per composer call (compose_packed's `count`)
    compose = model.model.composer.compose_packed
    model.model.composer.compose_packed = lambda *arguments, **options: (calls.append(arguments[3]) or
                                                                          compose(*arguments, **options))
    cached = hf_slm.score(model, tokenizer, [words], **search)[0]
    assert max(calls) > 1  # several hypotheses' compositions in one call
    del model.model.composer.compose_packed
    reencoded = hf_slm.score(model, tokenizer, [words], use_cache=False, **search)[0]
    assert cached["tree"] == reencoded["tree"]
    assert cached["log_prob"] == pytest.approx(reencoded["log_prob"], abs=1e-4)
    assert [t["log_prob"] for t in cached["trees"]] == pytest.approx([t["log_prob"] for t in reencoded["trees"]], abs=1e-4)
    ids = tokenizer(cached["tree"])["input_ids"]
    with torch.no_grad():
        joint = model(input_ids=torch.tensor([ids])).logits[0, :-1].log_softmax(-1).gather(1, torch.tensor(ids[1:])[:, None])
    assert cached["trees"][0]["log_prob"] == pytest.approx(float(joint.sum()), abs=1e-4)


def test_bi_dn_search_keeps_only_hypotheses_the_words_left_can_complete(one_thread):
    """A Bi-Dn constituent needs two children, so a hypothesis that opened more `(` than its words left can fill
    can never finish; at beam 10 on a 20-word sentence such hypotheses used to fill the beam and the search found
    no tree at all. Now an opening is allowed only while the pieces left can complete every open constituent."""
    model, tokenizer = tiny("bi-dn-in-m")
    rules = get_grammar("bi-dn-in-m", ActionLayout(**tokenizer.action_layout))
    vocabulary = ["the", "blue", "bird", "sings", "a", "dog", "barks", "at", "moon", "essay", "quickly"]
    sentences = [[vocabulary[(7 * i + shift) % len(vocabulary)] for i in range(20)] for shift in range(2)]
    pieces = [[tokenizer(word, is_split_into_words=True, add_special_tokens=False)["input_ids"] for word in words]
              for words in sentences]
    assert sum(len(word) for word in pieces[0]) > 40  # words of several pieces: their own brackets come too
    # no p_c: only the words left limit the openings (with it, the cap hid the failure on these sentences)
    results = model.word_synchronous_beam_search(pieces, beam_size=10, word_beam_size=10, max_consecutive_open=None,
                                                 word_start_mask=tokenizer.word_start_mask)
    for result, sentence in zip(results, pieces):
        assert result.trees, "no complete tree at beam 10"
        for ids, log_prob in result.trees:
            rules.validate(ids)  # a complete binary tree
            assert [i for i in ids if rules.layout.kind(i) == hf_slm.ActionKind.TERMINAL] == sum(sentence, [])
            assert log_prob < 0


def test_a_greedy_bi_dn_search_never_completes_the_tree_before_the_last_word(one_thread):
    """Top-down, a Bi word of k pieces brings its own k - 1 `(` and fills k child slots; a word that fills the last
    open slot completes the tree, and the words after it can never attach (a first word of several pieces with
    only its own brackets becomes the root). A search that keeps one hypothesis (beam 1), of a model that opens
    as little as it may, must still finish every sentence (paper 003's beam 10 keeps one per word)."""
    model, tokenizer = tiny("bi-dn-in-m")
    rules = get_grammar("bi-dn-in-m", ActionLayout(**tokenizer.action_layout))
    firsts = [w for w in ("quickly", "essay", "barks", "moon", "blue")
              if len(tokenizer(w, is_split_into_words=True, add_special_tokens=False)["input_ids"]) > 1]
    assert len(firsts) >= 3  # first words of several pieces
    sentences = [[first, "the", "bird", "sings"] for first in firsts]
    pieces = [[tokenizer(word, is_split_into_words=True, add_special_tokens=False)["input_ids"] for word in words]
              for words in sentences]
    with torch.no_grad():  # a model that opens as little as it may: a word whenever one is allowed
        model.output_bias[tokenizer.action_layout["open_nt_start"]] = -20.0
    results = model.word_synchronous_beam_search(pieces, beam_size=1, word_beam_size=1, fast_track=0,
                                                 word_start_mask=tokenizer.word_start_mask)
    for result, sentence in zip(results, pieces):
        assert result.trees, sentence
        ids = result.trees[0][0]
        rules.validate(ids)
        assert [i for i in ids if rules.layout.kind(i) == hf_slm.ActionKind.TERMINAL] == sum(sentence, [])


# ---- Nb-Up: the start pointer (section 2.2) --------------------------------------------------------------------

NB_UP = ("nb-up-in-m", "nb-up-in-nm", "nb-up-ex-m", "nb-up-ex-nm")


@pytest.mark.parametrize("grammar", ["nb-up-in-m", "nb-up-ex-nm"])
def test_the_start_pointer_learns_the_gold_starts_of_a_couple_of_trees(grammar, one_thread):
    """loss = lm_loss + start_loss, and overfitting two trees drives the pointer's NLL of the gold starts down: the
    gradient reaches Θ through the start loss."""
    model, tokenizer = tiny(grammar, vocab_size=30, sentencepiece_options={"model_type": "word"})
    inputs = tokenizer(unlabeled_trees(tokenizer)[1:], padding=True, return_tensors="pt")
    theta = model.model.start_pointer.theta.detach().clone()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

    def start_loss_without_dropout():  # training losses jump with dropout's masks: compare in eval mode
        model.eval()
        with torch.no_grad():
            loss = model(**inputs, labels=inputs["input_ids"]).start_loss.item()
        model.train()
        return loss

    before = start_loss_without_dropout()
    for _ in range(40):
        output = model(**inputs, labels=inputs["input_ids"])
        assert output.loss.item() == pytest.approx((output.lm_loss + output.start_loss).item(), abs=1e-5)
        optimizer.zero_grad()
        output.loss.backward()
        optimizer.step()
    assert not torch.equal(theta, model.model.start_pointer.theta)
    after = start_loss_without_dropout()
    assert after < 0.3 * before, (before, after)


def test_processes_weight_the_start_loss_by_their_share_of_starts(one_thread):
    """Under N processes each one's loss is weighted (training.process_share_loss) so that the average of their
    gradients, what DistributedDataParallel takes, is the whole batch's gradient, the pointer's loss included:
    rows split unevenly between two processes give the gradient of the batch read at once."""
    from hf_slm.training.train import auxiliary_losses_of, predicted_counts, process_share_loss

    model, tokenizer = tiny("nb-up-in-m", vocab_size=30, sentencepiece_options={"model_type": "word"})
    trees = unlabeled_trees(tokenizer)

    def batch(rows):
        inputs = tokenizer(rows, padding=True, return_tensors="pt")
        return dict(inputs, labels=inputs["input_ids"])

    def gradient(loss):
        model.zero_grad()
        loss.backward()
        return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])

    expected = gradient(model(**batch(trees)).loss)
    halves = [batch(trees[:2]), batch(trees[2:])]
    pad = model.config.pad_token_id
    auxiliary = auxiliary_losses_of(model.config)
    assert dict(auxiliary) == {"start_loss": "constituent_starts"}  # the grammar declares the pointer's loss
    per_half = torch.stack([predicted_counts(h, pad, auxiliary) for h in halves])  # [2, actions and starts]
    counts = {"actions": per_half[:, 0], "starts": per_half[:, 1]}
    shares = [counts[kind] / counts[kind].sum() for kind in ("actions", "starts")]
    assert not torch.allclose(shares[0], shares[1])  # weighting the pointer by actions would be wrong here
    total = 0
    for half in halves:
        answers = iter([counts["actions"], counts["starts"]])  # what gathering from both processes gives
        outputs = model(**half)
        total = total + gradient(process_share_loss(outputs.loss, outputs, half, pad, lambda _: next(answers), 2,
                                                    auxiliary_losses=auxiliary))
    torch.testing.assert_close(total / 2, expected, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("grammar, fields", [(name, {}) for name in NB_UP] + [
    # h takes the final layer's first two heads in its own order: restricted (COMPOSE rows: their own parameters),
    # then unrestricted
    ("nb-up-in-m", dict(distinct_compose_attention=True, num_unrestricted_heads=1))])
def test_the_batch_start_log_probs_equal_the_cached_decoders_step_by_step(grammar, fields, one_thread):
    """At every `)` of a tree, the teacher-forced start_log_probs (one forward over the whole tree) are finite exactly
    on the grammar's C_k and equal the KV-cache search decoder's, fed the tree one action at a time."""
    from hf_slm.modeling.hypothesis_rows import NewPositions
    from hf_slm.modeling.search_decoders import TransformerSearchDecoder

    model, tokenizer = tiny(grammar, **fields)
    encoded = tokenizer("( ( a dog ) ( barks ( at ( the moon ) ) ) )")  # constituents that start at constituents
    ids, starts = encoded["input_ids"], encoded["constituent_starts"]
    with torch.no_grad():
        batch = model(input_ids=torch.tensor([ids]), constituent_starts=torch.tensor([starts])).start_log_probs[0]
    grammar_rules, decoder = model.grammar, TransformerSearchDecoder(model)

    def positions(new):
        return NewPositions.from_lists([new], references=grammar_rules.references_positions)

    state = grammar_rules.start()
    cache, _ = decoder.start([[ids[0]]], positions(grammar_rules.step(state, ids[0])))
    checked = 0
    for k in range(1, len(ids)):
        if ids[k] == tokenizer.action_layout["close_nt_start"]:
            legal = grammar_rules.legal_starts(state)
            assert starts[k] in legal.tolist()
            assert torch.isfinite(batch[k - 1]).nonzero().squeeze(1).tolist() == legal.tolist()
            cached = decoder.pointer_log_probs(cache, grammar_rules.legal_start_positions(state)[None])[0]
            assert torch.allclose(cached, batch[k - 1, legal], atol=1e-5), (k, cached, batch[k - 1, legal])
            checked += 1
        new = grammar_rules.step(state, ids[k], start=starts[k])
        cache, _ = decoder.advance(cache, torch.tensor([0]), torch.tensor([ids[k]]), positions(new))
    assert checked == 5


@pytest.mark.parametrize("grammar", ["nb-up-in-m", "nb-up-ex-nm"])
def test_the_start_pointer_reads_the_same_under_left_and_right_padding(grammar, one_thread):
    """start_log_probs index actions within each sequence (`<s>` = 0), as constituent_starts do: a left-padded batch
    gives each row's numbers at its own columns, the same as right padding, and the same start_loss."""
    model, tokenizer = tiny(grammar)
    trees = unlabeled_trees(tokenizer)
    right = tokenizer(trees, padding=True, return_tensors="pt")
    left = tokenizer(trees, padding=True, padding_side="left", return_tensors="pt")
    with torch.no_grad():
        by_right, by_left = (model(**inputs, labels=inputs["input_ids"]) for inputs in (right, left))
    assert float(by_left.start_loss) == pytest.approx(float(by_right.start_loss), abs=1e-5)
    width = right["input_ids"].shape[1]
    for row, length in enumerate(right["attention_mask"].sum(1).tolist()):
        a, b = by_right.start_log_probs[row, :length, :length], by_left.start_log_probs[row, width - length:, :length]
        finite = torch.isfinite(a)
        assert finite.any() and torch.equal(finite, torch.isfinite(b))
        assert torch.allclose(a[finite], b[finite], atol=1e-5)


def _nb_up_trees(count, budget):
    """Every tree over `count` words with at most `budget` constituents, a constituent being a tuple of children
    (word indices or constituents) that may have one child: what Nb-Up's grammar allows under n_c = budget."""

    def constituents(i, j, budget):
        return [(tuple(children), used + 1) for children, used in splits(i, j, budget - 1)] if budget > 0 else []

    def splits(i, j, budget):
        if i == j:
            return [([], 0)]
        found = []
        for k in range(i + 1, j + 1):
            firsts = ([(i, 0)] if k == i + 1 else []) + constituents(i, k, budget)
            for child, used in firsts:
                found += [([child] + rest, used + more) for rest, more in splits(k, j, budget - used)]
        return found

    return [tree for tree, _ in constituents(0, count, budget)]


def _nb_up_sequence(tree, word_ids, layout):
    """(ids, starts) of a tree, bottom-up, each `)` pointing at its first item (a word or a constituent's `)`)."""
    ids, starts = [layout["bos_token_id"]], [-1]

    def visit(node):
        if isinstance(node, int):
            ids.append(word_ids[node])
        else:
            items = [visit(child) for child in node]
            ids.append(layout["close_nt_start"])
            starts.append(items[0])
            return len(ids) - 1
        starts.append(-1)
        return len(ids) - 1

    visit(tree)
    return ids + [layout["eos_token_id"]], starts + [-1]


@pytest.mark.parametrize("grammar", ["nb-up-in-m", "nb-up-ex-m", "nb-up-ex-nm"])
def test_an_exhaustive_beam_finds_every_nb_up_tree_with_its_brute_force_score(grammar, one_thread):
    """With n_c = 3 and a beam wider than the tree space, the search's trees over three words are exactly the trees
    enumerated here (one-child constituents included), each scored as a forward pass over the whole tree scores it:
    sum of log p(action) + log p(start) of every `)`; the best is the brute-force best, log p(x) their logsumexp."""
    from hf_slm.search.beam import gold_tree_coverage

    model, tokenizer = tiny(grammar, vocab_size=30, sentencepiece_options={"model_type": "word"})
    pieces = [tokenizer(word, is_split_into_words=True, add_special_tokens=False)["input_ids"] for word in SENTENCE]
    assert all(len(p) == 1 for p in pieces)
    layout = tokenizer.action_layout
    trees = _nb_up_trees(len(SENTENCE), budget=3)
    sequences = [_nb_up_sequence(tree, [p[0] for p in pieces], layout) for tree in trees]
    assert len(set(map(str, sequences))) == len(trees) == 27
    width = max(len(ids) for ids, _ in sequences)
    ids = torch.tensor([i + [0] * (width - len(i)) for i, _ in sequences])
    starts = torch.tensor([s + [-1] * (width - len(s)) for _, s in sequences])
    real = (torch.arange(width)[None] < torch.tensor([len(i) for i, _ in sequences])[:, None])
    with torch.no_grad():
        output = model(input_ids=ids, attention_mask=real.long(), constituent_starts=starts)
    actions = torch.log_softmax(output.logits[:, :-1], -1).gather(2, ids[:, 1:, None])[:, :, 0]
    pointed = output.start_log_probs[:, :-1].gather(2, starts[:, 1:].clamp(min=0)[:, :, None])[:, :, 0]
    joint = (actions * real[:, 1:]).sum(1) + torch.where(starts[:, 1:] >= 0, pointed, 0.0).sum(1)
    brute = {(tuple(i), tuple(s)): float(score) for (i, s), score in zip(sequences, joint)}

    result = model.word_synchronous_beam_search([pieces], beam_size=400, word_beam_size=400, fast_track=0,
                                                max_nonterminals=3, num_trees=400)[0]
    found = {(tuple(i), tuple(i.starts)): score for i, score in result.trees}
    assert set(found) == set(brute)
    for key, score in found.items():
        assert score == pytest.approx(brute[key], abs=1e-4)
    best = max(brute, key=brute.get)
    assert (tuple(result.trees[0][0]), tuple(result.trees[0][0].starts)) == best
    assert result.log_prob == pytest.approx(float(torch.logsumexp(joint.double(), 0)), abs=1e-4)
    parsed = hf_slm.parse(model, tokenizer, [SENTENCE], beam_size=400, word_beam_size=400, fast_track=0,
                          max_nonterminals=3, progress=False)[0]
    assert parsed == tokenizer.decode(list(best[0]), starts=list(best[1]), skip_special_tokens=True)
    # n_c bounds a Nb-Up tree's `)` (paper 003, section 2.6): with one, only the flat tree; also when gold trees are
    # replayed through the search
    assert hf_slm.parse(model, tokenizer, [SENTENCE], beam_size=50, word_beam_size=10, max_nonterminals=1,
                        progress=False)[0] == "( the dog sings )"
    coverage, unreachable = gold_tree_coverage(tokenizer, ["( the dog sings )", "( ( the dog ) sings )"], grammar=grammar,
                                               max_nonterminals=1)
    assert (coverage, unreachable) == (0.5, [1])


def test_a_start_outside_c_k_is_a_clear_error_in_the_model_and_the_search(one_thread):
    from hf_slm.modeling.hypothesis_rows import hypothesis_rows

    model, tokenizer = tiny("nb-up-in-m", vocab_size=30, sentencepiece_options={"model_type": "word"})
    encoded = tokenizer("( ( a dog ) barks )")  # `<s> a dog ) barks ) </s>`: the root starts at the inner `)`, 3
    ids = torch.tensor([encoded["input_ids"]])
    with pytest.raises(ValueError, match=r"needs constituent_starts \[B, T\] .* the tokenizer returns them"):
        model(input_ids=ids)
    wrong = torch.tensor([[-1, -1, -1, 1, -1, 1, -1]])  # `a` (1) is inside the closed `( a dog )` by then
    with pytest.raises(ValueError, match=r"action 5 .*: start 1 is not a feasible start position; expected one of "
                                         r"C_k = \[3, 4\]"):
        model(input_ids=ids, constituent_starts=wrong)
    grammar = model.grammar
    state = grammar.start()
    for action, start in zip(encoded["input_ids"][:5], encoded["constituent_starts"][:5]):
        grammar.step(state, action, start=start)
    rows = hypothesis_rows(grammar, [state])
    assert rows.start_choices()[0].tolist() == [[3, 4]]
    with pytest.raises(ValueError, match="start 1 is not a feasible start position"):
        rows.step(torch.tensor([encoded["input_ids"][5]]), torch.tensor([1]))
    # Re-encoding action-id prefixes would lose the starts: refused, with the way out named
    with pytest.raises(ValueError, match=r"cannot be re-encoded; search it with the KV-cache decoder \(use_cache=True\)"):
        hf_slm.score(model, tokenizer, [SENTENCE], use_cache=False, progress=False)


@pytest.mark.parametrize("grammar", ["nb-up-in-nm", "nb-up-ex-m"])
def test_nb_up_generation_and_sampling_give_trees_that_read_back_with_their_starts(grammar, one_thread):
    """Beam search, top-k sampling (generate) and ancestral sampling draw each `)` with a start, and their trees read
    back through the tokenizer: every tree continues the prompt's words; generate's tensor carries the starts."""
    from hf_slm.search.beam import generate_trees
    from hf_slm.search.sampling import sample_trees

    model, tokenizer = tiny(grammar, vocab_size=30, sentencepiece_options={"model_type": "word"})
    beam = generate_trees(model, tokenizer, prompt=["the", "dog"], num_trees=2, max_new_words=2)
    sampled = generate_trees(model, tokenizer, prompt=["the"], num_trees=2, top_k=3, max_new_words=3, seed=0)
    for text, prompt in [(t, ["the", "dog"]) for t in beam] + [(t, ["the"]) for t in sampled]:
        tree = parse_tree(text.replace("( ", "(X "))
        assert tree.leaves()[: len(prompt)] == prompt, text
    output = model.generate(tokenizer(["the"], is_split_into_words=True, return_tensors="pt")["input_ids"],
                            tokenizer=tokenizer, num_beams=2, max_new_tokens=2)
    assert output.constituent_starts.shape == output.shape
    assert ((output.constituent_starts >= 0) == (output == tokenizer.action_layout["close_nt_start"])).all()
    for ids in sample_trees(model, num_samples=3, max_words=3, word_start_mask=tokenizer.word_start_mask, seed=1):
        assert len(ids.starts) == len(ids)
        parse_tree(tokenizer.tree_with_words(ids).replace("( ", "(X "))  # a tree, not the fallback action string
