"""Paper 003's table (section 3, "Hyper-parameters"; Appendix A) beside the presets of its compositional SLMs and
GPT-2 baselines (hf_slm/families/paper_settings.py compares them; `hf-slm presets --paper 003`)."""

from .paper_settings import NOT_GIVEN, PaperTable, PaperValue

_GPT2 = "section 3 (GPT-2 small)"
_APPENDIX_A = "Appendix A"
_BATCH = ("the paper fits each model's batch to its GPU memory and gives no number; 16 sequences is this library's "
          "choice")
_STEPS = "the paper gives no step count (about 35 hours on 4 A6000s); 100,000 is this library's choice"
_COMPOSER_REST = "the paper gives the composer's width (256) and depth (4) only; 4 heads and 4 x 256 are this library's"


def _column(name, variants_with_composer):
    cutoff = 1024 if name == "gpt2-token" else 2048
    column = {
        "model.grammar": PaperValue(name, "section 2.5 (the variants) and section 3 (the baselines)"),
        "model.vocab_size": PaperValue(50257, _GPT2),
        "model.hidden_size": PaperValue(768, _GPT2),
        "model.intermediate_size": PaperValue(3072, _GPT2),
        "model.num_hidden_layers": PaperValue(12, _GPT2),
        "model.num_attention_heads": PaperValue(12, _GPT2),
        # GPT-2 small's dropouts (embeddings and residual 0.1; nothing before the output) and pre-layer norm
        "model.embedding_dropout": PaperValue(0.1, _GPT2),
        "model.core_dropout": PaperValue(0.1, _GPT2),
        "model.final_dropout": PaperValue(0.0, _GPT2),
        "model.pre_layer_norm": PaperValue(True, _GPT2),
        "model.hidden_act": PaperValue("gelu_pytorch_tanh", "the authors' released GPT-2 configs (gelu_new)"),
        "model.max_sequence_length": PaperValue(cutoff, _APPENDIX_A + " (cutoff length)"),
        "training.batch_size": PaperValue(NOT_GIVEN, _APPENDIX_A + " (not given)", _BATCH),
        "training.max_steps": PaperValue(NOT_GIVEN, _APPENDIX_A + " (not given)", _STEPS),
        # "a fixed learning rate of 5e-5": no warm-up, no decay
        "training.warmup_steps": PaperValue(0, _APPENDIX_A + " (fixed learning rate)"),
        "training.initial_learning_rate": PaperValue(5e-5, _APPENDIX_A),
        "training.learning_rate": PaperValue(5e-5, _APPENDIX_A),
        "training.final_learning_rate": PaperValue(5e-5, _APPENDIX_A),
        # sentences packed into sequences of up to the cutoff, cut only between sentences
        "training.pack_to": PaperValue(cutoff, _APPENDIX_A + " (packing)"),
    }
    if name in variants_with_composer:
        column.update({
            "model.composer_hidden_size": PaperValue(256, "section 3 (external composition)"),
            "model.composer_num_layers": PaperValue(4, "section 3 (external composition)"),
            "model.composer_num_heads": PaperValue(NOT_GIVEN, "section 3 (not given)", _COMPOSER_REST),
            "model.composer_intermediate_size": PaperValue(NOT_GIVEN, "section 3 (not given)", _COMPOSER_REST),
        })
    return column


# The sixteen variants (tree, order, composition, masking) and the two baselines.
VARIANTS = tuple(f"{tree}-{order}-{composition}-{masking}" for tree in ("bi", "nb") for order in ("dn", "up")
                 for composition in ("in", "ex") for masking in ("m", "nm"))
_EXTERNAL = {name for name in VARIANTS if "-ex-" in name}

PAPER_003 = PaperTable(
    paper="003",
    title="Compositional syntactic LMs: section 3 (GPT-2 small for every model, the external composer), Appendix A "
          "(cutoff lengths, learning rate)",
    presets={name: _column(name, _EXTERNAL) for name in VARIANTS + ("gpt2-token", "gpt2-tree")},
    notes=(
        ("vocabulary", "GPT-2's BPE (50,257 tokens, section 3)", "50,257 pieces trained on the data (`--pieces` "
         "chooses the piece model)", "GPT-2's BPE files cannot be downloaded here (no model hub); a tokenizer built "
         "from them works with --tokenizer"),
        ("silver trees", "BLLIP-LG reparsed by Supar's CRF constituency parser, left-binarized with nltk (section 3)",
         "the trees a user gives (unlabelled on reading); binarization by the grammar",
         "the parser is a separate model outside this library"),
        ("packed sentences", "sentences cut only between each other, each modelled as a whole (section 3, Appendix "
         "A); whether a sentence attends the earlier ones of its sequence is not said", "each packed sentence attends "
         "itself only, its positions from 0 (hf_slm/data/packing.py)", "so a sentence's numbers are those it has alone: "
         "packing changes the speed, not the model"),
        ("parameter counts", "not given (the composer adds about 5%, section 3)", "not compared", "the paper gives no count to compare with"),
    ),
)
