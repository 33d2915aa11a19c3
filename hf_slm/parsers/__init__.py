"""hf-slm's proposal parsers: the parsers the papers' perplexity, reranking and attachment protocols draw their
proposal trees from, and that made their silver training trees (a CRF constituency parser, a biaffine dependency
parser), as HuggingFace models trained, loaded, published and run like the language models.

kinds.py: the registered parser kinds (one record each); data.py: training data and the collator; training.py:
`hf-slm parser train`; parser.py: loading, best trees and proposals drawn without replacement; proposals.py: proposal
files, journaled; evaluation.py: F1 / UAS of a parser's trees; scorer.py: a parser as the Scorer that silver trees and
`hf-slm parse` ask for trees.
"""
