"""Configurations of hf-slm's proposal parsers: a span CRF constituency parser (after Zhang, Zhou and Li 2020, the
kind of parser paper 003 drew its proposal and silver trees from) and a biaffine dependency parser with a
projective tree CRF (Dozat and Manning 2017, the kind paper 002 used).

Both read a sentence through one word encoder: word embeddings and a character BiLSTM under a word BiLSTM, trained
from scratch (encoder="lstm"), or a HuggingFace encoder (encoder="pretrained": BERT, RoBERTa, ...), each word's
vector pooled from its pieces. The vocabulary sizes and label ids come from the parser's tokenizer
(tokenization/tokenization_parser.py), as a syntactic LM's id layout comes from its tokenizer.

Hub code: copied into every parser checkpoint; imports only transformers and configuration_base.py.
"""

from transformers import PreTrainedConfig

from .configuration_base import check_whole_numbers

ENCODERS = ("lstm", "pretrained")
POOLINGS = ("first", "last", "mean")


class ProposalParserConfig(PreTrainedConfig):
    """What both parsers share: the word encoder and the tokenizer's vocabularies.

    Args:
        vocab_size: word ids (the tokenizer's words, specials and unknown-word classes).
        num_chars: character ids.
        encoder: "lstm" (trained from scratch) or "pretrained" (a HuggingFace encoder, `pretrained_encoder`).
        word_embedding_size, char_embedding_size, char_hidden_size: the word embedding, the character embedding
            and the character BiLSTM's output (both directions together) of the lstm encoder.
        lstm_hidden_size, lstm_layers: the word BiLSTM, per direction; its states are the words' vectors.
        embedding_dropout, lstm_dropout, mlp_dropout: dropout on the input vectors, between and after the BiLSTM
            layers (or on the pretrained encoder's word vectors), and inside the scorers' MLPs.
        pretrained_encoder: the HuggingFace encoder's config (its `to_dict()`), for encoder="pretrained".
        pretrained_encoder_name: the name or path it was first loaded from (what the card says).
        encoder_pooling: how a word's vector is pooled from its pieces' ("first", "last", "mean").
        vocabulary_fingerprint: the tokenizer's `vocabulary_fingerprint` (None: unknown).
    """

    def __init__(self, vocab_size=100, num_chars=10, encoder="lstm", word_embedding_size=100, char_embedding_size=50,
                 char_hidden_size=100, lstm_hidden_size=400, lstm_layers=3, embedding_dropout=0.33, lstm_dropout=0.33,
                 mlp_dropout=0.33, pretrained_encoder=None, pretrained_encoder_name=None, encoder_pooling="mean",
                 vocabulary_fingerprint=None, initializer_range=0.02, **kwargs):
        if encoder not in ENCODERS:
            raise ValueError(f"encoder {encoder!r}: expected one of {ENCODERS}")
        if encoder == "pretrained" and not isinstance(pretrained_encoder, dict):
            raise ValueError("encoder='pretrained' needs pretrained_encoder, the HuggingFace encoder's config as a dict")
        if encoder_pooling not in POOLINGS:
            raise ValueError(f"encoder_pooling {encoder_pooling!r}: expected one of {POOLINGS}")
        check_whole_numbers({"vocab_size": vocab_size, "num_chars": num_chars, "lstm_layers": lstm_layers,
                             "lstm_hidden_size": lstm_hidden_size, "word_embedding_size": word_embedding_size,
                             "char_embedding_size": char_embedding_size, "char_hidden_size": char_hidden_size})
        if char_hidden_size % 2:
            raise ValueError(f"char_hidden_size {char_hidden_size}: expected an even size (two directions)")
        self.vocab_size = vocab_size
        self.num_chars = num_chars
        self.encoder = encoder
        self.word_embedding_size = word_embedding_size
        self.char_embedding_size = char_embedding_size
        self.char_hidden_size = char_hidden_size
        self.lstm_hidden_size = lstm_hidden_size
        self.lstm_layers = lstm_layers
        self.embedding_dropout = embedding_dropout
        self.lstm_dropout = lstm_dropout
        self.mlp_dropout = mlp_dropout
        self.pretrained_encoder = pretrained_encoder
        self.pretrained_encoder_name = pretrained_encoder_name
        self.encoder_pooling = encoder_pooling
        self.vocabulary_fingerprint = vocabulary_fingerprint
        self.initializer_range = initializer_range
        # the tokenizer's `<pad>`, `<s>` and `</s>` (tokenization_parser.py)
        for name, value in (("pad_token_id", 0), ("bos_token_id", 1), ("eos_token_id", 2)):
            kwargs.setdefault(name, value)
        super().__init__(**kwargs)

    @property
    def word_vector_size(self):
        """The size of a word's vector from the encoder."""
        if self.encoder == "pretrained":
            return self.pretrained_encoder["hidden_size"]
        return 2 * self.lstm_hidden_size


class ConstituencyParserConfig(ProposalParserConfig):
    """A span CRF constituency parser (modeling_crf_parser.py).

    Args:
        num_span_labels: the bracketing labels (treebank labels, unary chains joined by "+", `<binarized>` and
            `<word>`; or `<constituent>` for unlabelled trees): the tokenizer's `labels`.
        labelled: the trees carry labels (False: paper 003's unlabelled trees, without unary chains).
        dummy_label_id, no_constituent_label_id: the ids of `<binarized>` (left binarization's nodes, left
            children only) and `<word>` (a one-word span that is no constituent).
        num_tags: POS tags predicted beside the tree (0: the training trees had none).
        span_mlp_size, label_mlp_size, tag_mlp_size: the MLPs of the span (structure) scorer, the label scorer
            and the tagger, each reading the fenceposts' (or words') vectors.
    """

    model_type = "crf_constituency_parser"

    def __init__(self, num_span_labels=3, labelled=True, dummy_label_id=0, no_constituent_label_id=1, num_tags=0,
                 span_mlp_size=500, label_mlp_size=100, tag_mlp_size=100, **kwargs):
        kwargs.setdefault("auto_map", {"AutoConfig": "configuration_parser.ConstituencyParserConfig",
                                       "AutoModel": "modeling_crf_parser.CrfConstituencyParser"})
        for name, value in (("dummy_label_id", dummy_label_id), ("no_constituent_label_id", no_constituent_label_id)):
            if not isinstance(value, int) or not 0 <= value < num_span_labels:
                raise ValueError(f"{name} is {value!r}; expected a label id in [0, {num_span_labels})")
        if dummy_label_id == no_constituent_label_id or num_span_labels < 3:
            raise ValueError(f"num_span_labels {num_span_labels}, dummy_label_id {dummy_label_id}, no_constituent_label_id "
                             f"{no_constituent_label_id}: expected two different reserved ids and at least one "
                             "constituent label")
        self.num_span_labels = num_span_labels
        self.labelled = bool(labelled)
        self.dummy_label_id = dummy_label_id
        self.no_constituent_label_id = no_constituent_label_id
        self.num_tags = num_tags
        self.span_mlp_size = span_mlp_size
        self.label_mlp_size = label_mlp_size
        self.tag_mlp_size = tag_mlp_size
        super().__init__(**kwargs)


class DependencyParserConfig(ProposalParserConfig):
    """A biaffine dependency parser with a projective tree CRF (modeling_biaffine_parser.py).

    Args:
        num_relations: the dependency relations (the tokenizer's `labels`).
        arc_mlp_size, relation_mlp_size: the MLPs of the arc scorer (Dozat and Manning: 500) and the relation
            scorer (100).
    """

    model_type = "biaffine_dependency_parser"

    def __init__(self, num_relations=1, arc_mlp_size=500, relation_mlp_size=100, **kwargs):
        kwargs.setdefault("auto_map", {"AutoConfig": "configuration_parser.DependencyParserConfig",
                                       "AutoModel": "modeling_biaffine_parser.BiaffineDependencyParser"})
        check_whole_numbers({"num_relations": num_relations})
        self.num_relations = num_relations
        self.arc_mlp_size = arc_mlp_size
        self.relation_mlp_size = relation_mlp_size
        super().__init__(**kwargs)


ConstituencyParserConfig._auto_class = "AutoConfig"
DependencyParserConfig._auto_class = "AutoConfig"
