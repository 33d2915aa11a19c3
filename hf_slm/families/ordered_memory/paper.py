"""Paper 001's table (Appendix A, Table 6; parameter counts of Tables 2 and 7) beside the SOM presets
(hf_slm/families/paper_settings.py compares them; `hf-slm presets --paper 001`)."""

from ..paper_settings import NOT_GIVEN, PaperTable, PaperValue, ParameterCount

# Table 6, one row per dataset: D_sem, D_syn, slots, embedding dropout, dropout, output dropout.
TABLE_6 = {"ptb": (300, 100, 15, 0.1, 0.3, 0.5), "bllip-xs": (300, 100, 15, 0.1, 0.3, 0.5),
           "bllip-sm": (400, 100, 15, 0.1, 0.2, 0.2), "bllip-md-bpe": (400, 100, 15, 0.0, 0.1, 0.1)}

_WIDTHS = ("Table 6 gives no width for the cells' MLP (eq. 8) nor for the parsers' scorers (eq. 5); 4 D and D are "
           "the widths that give the paper's parameter counts (Table 2: eSOM 17.7M, dSOM 16.3M; Table 7's dSOM / "
           "eSOM gaps), where the config's defaults 2 D and D / 2 give 13.6M")
_SCHEDULE = ("paper 001 gives no optimizer schedule, batch or step count; this library's choice (Adam, batch 64, "
             "peak 1e-3 after 1,000 warm-up steps, cosine decay)")


def _column(semantic, syntactic, slots, embedding, dropout, output, disentangled):
    table6 = "Table 6"
    column = {
        "model.hidden_size": PaperValue(semantic + syntactic, "Table 6 (D_sem + D_syn)"),
        "model.num_slots": PaperValue(slots, table6),
        "model.embedding_dropout": PaperValue(embedding, table6),
        "model.dropout": PaperValue(dropout, table6),
        "model.output_dropout": PaperValue(output, table6),
        "model.prediction_network": PaperValue("sampled", "section 3.2 (a slot sampled from p'_t; its argmax in "
                                                           "evaluation, section 3.3)"),
        "model.intermediate_size": PaperValue(NOT_GIVEN, "Table 6 (not given)", _WIDTHS),
        "model.parser_size": PaperValue(NOT_GIVEN, "Table 6 (not given)", _WIDTHS),
    }
    if disentangled:
        column.update({"model.disentangle": PaperValue(True, "section 3.4 (dSOM)"),
                       "model.semantic_size": PaperValue(semantic, table6),
                       "model.syntactic_size": PaperValue(syntactic, table6)})
    for name in ("batch_size", "max_steps", "warmup_steps", "initial_learning_rate", "learning_rate",
                 "final_learning_rate"):
        column[f"training.{name}"] = PaperValue(NOT_GIVEN, "Appendix A (not given)", _SCHEDULE)
    return column


_MD_DSOM = ("with GPT-2's 50,257 tokens the dSOM of Table 6's BLLIP-MD-BPE row has 36.0M free parameters (37.9M less "
            "the 1.92M its block-triangular layers hold at zero, the gap Table 7 shows at BLLIP-SM with the same "
            "D_sem and D_syn); Table 7's 34.8M is 3.1M below its eSOM, which no field of Table 6 accounts for")

PAPER_001 = PaperTable(
    paper="001",
    title="Syntactic Ordered Memory: Appendix A, Table 6 (sizes, dropouts); Tables 2 and 7 (parameter counts)",
    presets={f"{kind}-{data}": _column(*row, disentangled=kind == "dsom") for data, row in TABLE_6.items()
             for kind in ("esom", "dsom")},
    parameters={
        # Table 2 (PTB; section 4.1: 23,815 word types)
        "esom-ptb": ParameterCount(17.7, "Table 2", 23815),
        "dsom-ptb": ParameterCount(16.3, "Table 2", 23815),
        # Table 7, BLLIP-MD with GPT-2's subword vocabulary (50,257 tokens, section 4.1)
        "esom-bllip-md-bpe": ParameterCount(37.9, "Table 7 (MD)", 50257),
        "dsom-bllip-md-bpe": ParameterCount(34.8, "Table 7 (MD)", 50257, _MD_DSOM),
    },
    notes=(
        ("gold trees", "universal dependencies from Stanford CoreNLP (Table 1, section 3.3)",
         "CoNLL-U files, or PTB trees converted by Collins-style head rules (--convert-to-dependencies)",
         "CoreNLP is Java, outside this Python library; give CoNLL-U files converted by it for the paper's trees"),
        ("BLLIP-MD-BPE vocabulary", "GPT-2's subword vocabulary (section 4.1)",
         "a byte-level BPE trained on the data (--pieces byte_bpe)",
         "GPT-2's BPE files cannot be downloaded here (no model hub); a tokenizer built from them works with "
         "--tokenizer"),
        ("word vocabulary", "singletons mapped by the Berkeley parser's rules (section 4.1: PTB, 23,815 types)",
         "SyntacticWordTokenizer with --min-count 2 (the default): words seen once become unknown-word classes",
         "the same rule; the type count depends on the training data given"),
        ("dSOM parameter counts", "Table 2: dSOM 16.3M beside eSOM's 17.7M",
         "dsom-ptb stores 17,719,817 parameters (as esom-ptb), 16,279,817 of them free",
         "dSOM's block-triangular layers store full matrices and hold the semantic-to-syntactic block at zero by a "
         "mask; the comparison counts the free parameters (free_parameter_count)"),
        ("UF1 against PTB trees", "Table 8 (appendix B.1): EVALB, ignoring punctuation and trivial spans (Kim et "
                                  "al. 2019)",
         "hf-slm eval parse --gold TREES: hf_slm.evaluation.evalb's COLLINS.prm rules, unlabeled, punctuation by the "
         "gold POS tags, spans of one word and of the sentence left out, corpus micro-average",
         "EVALB is a C program, not run here; hf_slm.evaluation.evalb implements its rules"),
        ("BLLIP-XS / SM parameter counts", "Table 7: dSOM 16.4M / 39.5M, eSOM 17.8M / 41.4M",
         "not compared", "the paper does not give those word vocabularies' sizes (counted with GPT-2's for MD)"),
    ),
    count_parameters="hf_slm.families.ordered_memory.paper:free_parameter_count",
)


def free_parameter_count(model):
    """The parameters of a SOM model that training can move: all of them but, for dSOM, the weights of its block-
    triangular layers held at zero (a syntactic output reads no semantic input, section 3.4). The layers store full
    matrices and mask them, so the stored count of a dSOM equals its eSOM twin's; the paper counts the others."""
    masked = 0
    for module in model.modules():
        layout = getattr(module, "layout", None)
        if layout is not None and hasattr(module, "allowed"):
            in_syntactic, out_syntactic = layout
            masked += sum(out_syntactic) * sum(not syntactic for syntactic in in_syntactic)
    return sum(parameter.numel() for parameter in model.parameters()) - masked
