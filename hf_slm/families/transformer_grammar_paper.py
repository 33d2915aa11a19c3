"""Paper 000's table (Appendix B, Figure 9; section 3) beside the presets of TG, TXL (CC) and TXL (terminals)
(hf_slm/families/paper_settings.py compares them; `hf-slm presets --paper 000`)."""

from .paper_settings import PaperTable, PaperValue, ParameterCount

FIGURE_9 = "Figure 9"
# Section 3: on PTB, words, the rare ones (singletons, unseen words) replaced by Berkeley unknown-word classes after
# Dyer et al.'s preprocessing; on BLLIP-LG, 32K SentencePiece pieces (the presets' default vocabulary).
_PTB_WORDS = "section 3 (Dyer et al.'s preprocessing)"
_REFERENCE = "the authors' reference implementation"


def _figure_9(vocab, d, d_ff, layers, heads, batch, segment, memory, steps, warmup, peak, dropouts, documents=None,
              pieces=None):
    """One column of Figure 9 as preset fields (`documents`: the batch of the BLLIP docs. column; `pieces`: the
    vocabulary section 3 gives the column's data)."""
    embedding, core, final = dropouts
    column = {
        "model.vocab_size": PaperValue(vocab, FIGURE_9),
        "model.hidden_size": PaperValue(d, FIGURE_9),
        "model.intermediate_size": PaperValue(d_ff, FIGURE_9),
        "model.num_hidden_layers": PaperValue(layers, FIGURE_9),
        "model.num_attention_heads": PaperValue(heads, FIGURE_9),
        "model.embedding_dropout": PaperValue(embedding, FIGURE_9),
        "model.core_dropout": PaperValue(core, FIGURE_9),
        "model.final_dropout": PaperValue(final, FIGURE_9),
        "training.batch_size": PaperValue(batch, FIGURE_9 + (" (BLLIP sent.)" if documents else "")),
        "training.segment_length": PaperValue(segment, FIGURE_9 + " (L)"),
        "training.memory_length": PaperValue(memory, FIGURE_9 + " (M)"),
        "training.max_steps": PaperValue(steps, FIGURE_9),
        "training.warmup_steps": PaperValue(warmup, FIGURE_9),
        "training.initial_learning_rate": PaperValue(1e-7, FIGURE_9),
        "training.learning_rate": PaperValue(peak, FIGURE_9),
        "training.final_learning_rate": PaperValue(3e-7, FIGURE_9),
    }
    # Not in the paper: its reference implementation's computation (issue 39)
    column["model.hidden_act"] = PaperValue("gelu_pytorch_tanh", _REFERENCE + " (jax.nn.gelu: the tanh approximation)")
    column["model.core_dropout_on_embeddings"] = PaperValue(True, _REFERENCE + " (the core dropout after the "
                                                                  "embedding dropout)")
    if documents is not None:
        column["training.document_batch_size"] = PaperValue(documents, FIGURE_9 + " (BLLIP docs.)")
    if pieces is not None:
        column["training.pieces"] = PaperValue(pieces, _PTB_WORDS)
    return column


# Figure 9's columns: PTB TXL (terminals); PTB TXL (CC) and TG; BLLIP-LG (every model).
PTB_TERMINALS = dict(vocab=23835, d=192, d_ff=768, layers=16, heads=8, batch=64, segment=80, memory=80, steps=50_000,
                     warmup=6_000, peak=6.4e-4, dropouts=(0.25, 0.24, 0.49), pieces="words")
PTB_SYNTACTIC = dict(PTB_TERMINALS, vocab=23888, segment=192, memory=192, peak=7.1e-4, dropouts=(0.34, 0.19, 0.45))
BLLIP = dict(vocab=32768, d=1024, d_ff=4096, layers=16, heads=8, batch=176, documents=64, segment=256, memory=256,
             steps=100_000, warmup=8_000, peak=1.5e-4, dropouts=(0.1, 0.1, 0.1))


def _with_grammar(column, grammar, source="section 3 (the model)"):
    return dict(column, **{"model.grammar": PaperValue(grammar, source)})


# Table 2's TG (TXL mem. & rel. pos.) (section 3.5): a TG in TG's settings, which Figure 9 gives for every TG
_TXL_POSITIONS = "section 3.5, Table 2: TG (TXL mem. & rel. pos.)"


PAPER_000 = PaperTable(
    paper="000",
    title="Transformer Grammars: Appendix B, Figure 9 (model and training); section 3 (parameter counts, data)",
    presets={
        "tg-ptb": _with_grammar(_figure_9(**PTB_SYNTACTIC), "tg"),
        "txl-cc-ptb": _with_grammar(_figure_9(**PTB_SYNTACTIC), "choe_charniak"),
        "txl-terminals-ptb": _with_grammar(_figure_9(**PTB_TERMINALS), "terminals"),
        "tg-bllip": _with_grammar(_figure_9(**BLLIP), "tg"),
        "tg-txl-positions-ptb": _with_grammar(_figure_9(**PTB_SYNTACTIC), "tg_txl_positions", _TXL_POSITIONS),
        "tg-txl-positions-bllip": _with_grammar(_figure_9(**BLLIP), "tg_txl_positions", _TXL_POSITIONS),
        "txl-cc-bllip": _with_grammar(_figure_9(**BLLIP), "choe_charniak"),
        "txl-terminals-bllip": _with_grammar(_figure_9(**BLLIP), "terminals"),
    },
    # Section 3: "On PTB, we use 16-layer models with 12M parameters; on BLLIP-LG, ... 252M parameters."
    parameters={name: ParameterCount(millions, "section 3", digits=0)
                for names, millions in ((("tg-ptb", "tg-txl-positions-ptb", "txl-cc-ptb", "txl-terminals-ptb"), 12),
                                        (("tg-bllip", "tg-txl-positions-bllip", "txl-cc-bllip",
                                          "txl-terminals-bllip"), 252))
                for name in names},
    notes=(
        ("PTB tokenizer", "words, with Berkeley unknown-word classes for singletons and unseen words (section 3, "
         "Dyer et al.'s preprocessing)", ("the PTB presets train that vocabulary (training.pieces 'words': "
                                          "SyntacticWordTokenizer, words seen twice or more; --pieces words names it "
                                          "for any paper 000 preset)"),
         ("its classes are this library's Berkeley-style signatures (tokenization_slm.unknown_word_signature), "
          "not the reference's code; the vocabulary's size is the data's, so model.vocab_size is the tokenizer's, "
          "and --pieces sentencepiece or --vocab-size train pieces instead")),
        ("models per setting", "100 seeds, the mean and deviation reported (section 3)", "one run per command",
         "train several with --seed"),
        ("best checkpoint", "the one of lowest validation loss (section 3, Appendix B)",
         "the same when --eval is given (hf_slm/training/train.py: load_best_model_at_end on eval_loss)",
         "without --eval there is nothing to select on: the last step's model is kept"),
    ),
)
