"""Configuration of Syntactic Ordered Memory (SOM, paper 001): eSOM, dSOM and the switches of Table 2's ablations.

Hub code: copied into every SOM checkpoint; imports only transformers and configuration_base.py.
"""

from .configuration_base import SyntacticModelConfig, check_whole_numbers

STRUCTURE_LOSSES = ("adaptive", "teacher_forcing")
PREDICTION_NETWORKS = ("mixture", "sampled")
SOM_AUTO_CLASSES = {
    "AutoConfig": "configuration_som.SyntacticOrderedMemoryConfig",
    "AutoModel": "modeling_som.SyntacticOrderedMemoryModel",
    "AutoModelForCausalLM": "modeling_som.SyntacticOrderedMemoryForCausalLM",
}


class SyntacticOrderedMemoryConfig(SyntacticModelConfig):
    """Configuration of a SOM language model (paper 001; the paper's PTB setting: 15 slots, 400 dims).

    SOM is a recurrent word-level LM: its parse is a latent soft structure inside the model, marginalized by
    the soft parser, so p(x) = prod_t p(x_t | x_<t) is exact (no beam, no bound).

    Args (SyntacticModelConfig's, the vocabulary and the special ids, with SOM's defaults; there is no grammar):
        vocab_size: number of token ids (a word vocabulary, SyntacticWordTokenizer, or subword pieces).
        hidden_size: D, the size of embeddings, memory slots and hidden states (the output layer is tied to the
            embeddings). For dSOM, D = semantic_size + syntactic_size.
        num_slots: N, the number of memory slots: the deepest tree the grid holds (section 3.1). The first
            token (`<s>`) uses the top slot; trees deeper than the grid are flattened at the bottom.
        intermediate_size: hidden size of the two-layer MLP inside every cell (eq. 8); None: 2 * hidden_size.
        parser_size: hidden size of the split scorers of p_t and p'_t (eq. 5); None: hidden_size // 2.
        disentangle: dSOM (section 3.4): slots, embeddings and hidden states split into a semantic segment
            (the first semantic_size features) and a syntactic one; linear layers are block triangular (the
            syntactic outputs read syntactic inputs only), layer norms are separate per segment, and p_t, p'_t
            read the semantic segment through a gradient stop. False: eSOM.
        semantic_size, syntactic_size: D_sem and D_syn of dSOM (ignored by eSOM). When one is None it is
            hidden_size minus the other; they must add up to hidden_size.
        use_prediction_network: predict the next token from h_t, the RNN over the memory chosen by the
            zero-step look-ahead parser p'_t (section 3.2). False is Table 2's "- Prediction network": the top
            candidate slot predicts the next token (p'_t is then not used).
        prediction_network: how h_t reads the slots' RNN outputs RNN_i = RNN(M_t^N, ..., M_t^{i+1}, M^_t^i) (eq. 7).
            "sampled" is section 3.2's: one slot i is drawn from p'_t in training and the argmax of p'_t is taken
            in evaluation (eqs. 12-13, "the same operations are applied to p'_t"), h_t = RNN_i; the LM loss then
            sends no gradient into p'_t, which learns from the structural loss alone. "mixture" (the default,
            what checkpoints saved before this field was added compute) is the expectation of that choice,
            h_t = sum_i p'_t(i) RNN_i, in training and evaluation alike. Either way p(x) is exact: in evaluation
            each step's choice depends on x_<=t only, so every p(x_{t+1} | x_<=t) is a normalized distribution.
        oracle_trees: Table 2's "- Predicted tree + Gold tree": whenever the gold tree is given
            (som_first_siblings), in training and in evaluation, the memory follows its decisions (the gold
            grid) instead of p_t's, and the structural labels are that grid. Without a gold tree (scoring plain
            text) the model follows its own parser.
        structure_loss: "adaptive" (Algorithm 1: labels from the gold tree and the model's own decisions,
            sampled from p_t in training, argmax in evaluation) or "teacher_forcing" (Table 2's ablation: in
            training the memory follows the gold decisions and the labels are the gold grid).
        lm_loss_weight, structure_loss_weight: the loss is lm_loss_weight * L_LM + structure_loss_weight * L_S;
            lm_loss_weight=0 is Table 2's "- Language model loss".
        dropout: dropout before every linear layer inside the cells and scorers (Appendix A).
        embedding_dropout: drops whole word vectors (a word's embedding is set to 0) in training.
        output_dropout: dropout before the output layer.
        layer_norm_eps: epsilon of the layer norms of eq. 9.
        initializer_range: standard deviation of the embedding initialization.
        pad_token_id, bos_token_id, eos_token_id, unk_token_id: the tokenizer's special ids.
        vocabulary_fingerprint: the tokenizer's `vocabulary_fingerprint` (None: unknown).
    """

    model_type = "syntactic_ordered_memory"
    auto_classes = SOM_AUTO_CLASSES

    def __init__(
        self,
        vocab_size=10000,
        hidden_size=400,
        num_slots=15,
        intermediate_size=None,
        parser_size=None,
        disentangle=False,
        semantic_size=None,
        syntactic_size=None,
        use_prediction_network=True,
        prediction_network="mixture",
        oracle_trees=False,
        structure_loss="adaptive",
        lm_loss_weight=1.0,
        structure_loss_weight=1.0,
        dropout=0.1,
        embedding_dropout=0.1,
        output_dropout=0.1,
        layer_norm_eps=1e-5,
        initializer_range=0.02,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        unk_token_id=3,
        tie_word_embeddings=True,
        vocabulary_fingerprint=None,
        **kwargs,
    ):
        check_whole_numbers({"hidden_size": hidden_size})
        check_whole_numbers({"num_slots": num_slots}, minimum=3)  # the context, <s> and one level
        if prediction_network not in PREDICTION_NETWORKS:
            raise ValueError(f"prediction_network is {prediction_network!r}; expected one of {PREDICTION_NETWORKS}")
        if structure_loss not in STRUCTURE_LOSSES:
            raise ValueError(f"structure_loss is {structure_loss!r}; expected one of {STRUCTURE_LOSSES}")
        if disentangle:
            if semantic_size is None and syntactic_size is None:
                raise ValueError("disentangle=True needs semantic_size or syntactic_size (D_sem, D_syn)")
            semantic_size = hidden_size - syntactic_size if semantic_size is None else semantic_size
            syntactic_size = hidden_size - semantic_size if syntactic_size is None else syntactic_size
            if semantic_size < 1 or syntactic_size < 1 or semantic_size + syntactic_size != hidden_size:
                raise ValueError(f"semantic_size {semantic_size} + syntactic_size {syntactic_size} must be positive and "
                                 f"add up to hidden_size {hidden_size}")
        if not tie_word_embeddings:
            raise ValueError("SOM ties its output layer to the word embeddings (eq. 10); tie_word_embeddings must be True")
        self.hidden_size = hidden_size
        self.num_slots = num_slots
        self.intermediate_size = intermediate_size if intermediate_size is not None else 2 * hidden_size
        self.parser_size = parser_size if parser_size is not None else max(1, hidden_size // 2)
        self.disentangle = bool(disentangle)
        self.semantic_size = semantic_size if disentangle else None
        self.syntactic_size = syntactic_size if disentangle else None
        self.use_prediction_network = bool(use_prediction_network)
        self.prediction_network = prediction_network
        self.oracle_trees = bool(oracle_trees)
        self.structure_loss = structure_loss
        self.lm_loss_weight = float(lm_loss_weight)
        self.structure_loss_weight = float(structure_loss_weight)
        self.dropout = dropout
        self.embedding_dropout = embedding_dropout
        self.output_dropout = output_dropout
        self.layer_norm_eps = layer_norm_eps
        self.initializer_range = initializer_range
        super().__init__(vocab_size=vocab_size, pad_token_id=pad_token_id, bos_token_id=bos_token_id,
                         eos_token_id=eos_token_id, unk_token_id=unk_token_id,
                         vocabulary_fingerprint=vocabulary_fingerprint, tie_word_embeddings=tie_word_embeddings,
                         **kwargs)


# Appendix A, Table 6: D_sem, D_syn, slots and the three dropout rates per dataset; eSOM's hidden size is
# D_sem + D_syn. The vocabulary size comes from the tokenizer (preset_som_config(name, vocab_size=...)).
# Table 6 gives neither the cells' MLP width nor the parsers' scorer width: 4 D and D give Table 2's counts (PTB,
# 23,815 words: eSOM 17.7M; dSOM 16.3M once the weights its block-triangular layers hold at zero are left out) and
# Table 7's dSOM / eSOM gaps (1.4M at D 400, 1.9M at D 500); the config's defaults (2 D, D / 2) give 13.6M
# (hf_slm/families/ordered_memory/paper.py holds the comparison). The presets choose the slot as section 3.2 does
# (prediction_network="sampled").
SOM_PRESETS = {}
for _data, _sem, _syn, _embedding, _dropout, _output in (("ptb", 300, 100, 0.1, 0.3, 0.5),
                                                         ("bllip-xs", 300, 100, 0.1, 0.3, 0.5),
                                                         ("bllip-sm", 400, 100, 0.1, 0.2, 0.2),
                                                         ("bllip-md-bpe", 400, 100, 0.0, 0.1, 0.1)):
    _common = dict(hidden_size=_sem + _syn, num_slots=15, embedding_dropout=_embedding, dropout=_dropout,
                   output_dropout=_output, intermediate_size=4 * (_sem + _syn), parser_size=_sem + _syn,
                   prediction_network="sampled")
    SOM_PRESETS[f"esom-{_data}"] = dict(_common)
    SOM_PRESETS[f"dsom-{_data}"] = dict(_common, disentangle=True, semantic_size=_sem, syntactic_size=_syn)


def preset_som_config(name, **overrides):
    """The SyntacticOrderedMemoryConfig of a Table 6 setting ("esom-ptb", "dsom-bllip-sm", ...), with overrides."""
    if name not in SOM_PRESETS:
        raise ValueError(f"unknown SOM preset {name!r}; expected one of {sorted(SOM_PRESETS)}")
    return SyntacticOrderedMemoryConfig(**{**SOM_PRESETS[name], **overrides})


SyntacticOrderedMemoryConfig._auto_class = "AutoConfig"
