"""Paper 002's table (section 4: "the same hyperparameters as in Sartran et al. (2022)", i.e. paper 000's Figure 9
for BLLIP-LG sentences, 16 layers and 252M parameters, with the embeddings' learning rate x2) beside the presets of
DTG and TXL (trans) (hf_slm/families/paper_settings.py compares them; `hf-slm presets --paper 002`)."""

from .paper_settings import PaperTable, PaperValue, ParameterCount
from .transformer_grammar_paper import BLLIP, _figure_9

_SECTION_4 = "section 4 (paper 000's Figure 9, BLLIP sent.)"


def _column(grammar):
    column = {field: PaperValue(given.value, _SECTION_4 if given.source.startswith("Figure 9") else given.source)
              for field, given in _figure_9(**BLLIP).items()}
    column["training.document_batch_size"] = PaperValue(
        64, "paper 000's Figure 9, BLLIP docs. (paper 002 models sentences only: unused by its runs)")
    column["training.embedding_learning_rate_multiplier"] = PaperValue(2.0, "section 4 (training details)")
    column["model.grammar"] = PaperValue(grammar, "sections 3 and 4 (the models)")
    # Not in the paper: its released code's feed-forward block (a PyTorch Transformer-XL), and paper 000's embedding
    # dropout, which that code does not apply twice (issue 39)
    column["model.hidden_act"] = PaperValue("relu", "the authors' released code (nn.ReLU)")
    column.pop("model.core_dropout_on_embeddings", None)
    return column


PAPER_002 = PaperTable(
    paper="002",
    title="Dependency Transformer Grammars: section 4 (paper 000's BLLIP setting, embedding learning rate x2)",
    presets={"dtg-bllip": _column("dtg"), "txl-trans-bllip": _column("txl_trans")},
    parameters={name: ParameterCount(252, "section 4", digits=0) for name in ("dtg-bllip", "txl-trans-bllip")},
    notes=(
        ("training trees", "BLLIP-LG parsed by Supar's Biaffine-roberta into unlabeled projective dependency trees "
         "(section 4)", "the CoNLL-U files (or WORD/HEAD trees) a user gives",
         "the parser is a separate model outside this library; parse with it and give its output"),
        ("PTB gold trees of reranking (Table 3)", "converted by CoreNLP 3.3.0 (section 4.3)",
         "`hf-slm data prepare` converts PTB trees by Collins-style head rules (hf_slm/data/dependency_conversion.py)",
         "CoreNLP is Java; give CoNLL-U files converted by it for the paper's gold trees"),
        ("DTG-eager and DTG-swift", "their own models (Table 2)",
         "dtg-bllip with --set grammar=dtg_eager or dtg_swift", "the same settings with another grammar"),
    ),
)
