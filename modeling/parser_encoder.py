"""The word encoder and scorer layers the proposal parsers share.

A sentence arrives as `<s> w1 ... wn </s>` (tokenization/tokenization_parser.py): input_ids [B, T] (T = n + 2 and
padding), char_ids [B, T, C], attention_mask [B, T]. The encoder gives every position a vector, [B, T, D]:
- "lstm": a word embedding and a character BiLSTM's summary of the word, concatenated, through a word BiLSTM
  (Zhang, Zhou and Li 2020; Dozat and Manning 2017). Sentences are packed by length, so a sentence's vectors do not
  depend on what else is in its batch.
- "pretrained": a HuggingFace encoder over the sentence's pieces (piece_ids [B, P], piece_attention_mask [B, P]),
  each position's vector pooled from its pieces (word_piece_spans [B, T, 2]: the [start, end) of its pieces; `<s>`
  and `</s>` take the encoder's own first and last special pieces).

Hub code: imports torch, transformers and its siblings only.
"""

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


class MLP(nn.Module):
    """Linear, LeakyReLU(0.1), dropout: what each scorer reads its inputs through."""

    def __init__(self, in_size, out_size, dropout):
        super().__init__()
        self.linear = nn.Linear(in_size, out_size)
        self.activation = nn.LeakyReLU(0.1)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(self.activation(self.linear(x)))


class Biaffine(nn.Module):
    """s[b, x, y, o] = [l_x; 1]^T W_o [r_y; 1], the constant 1 on each side where its bias is on.

    left [B, X, Dl], right [B, Y, Dr] -> [B, X, Y, outputs]."""

    def __init__(self, left_size, right_size, outputs=1, left_bias=True, right_bias=True):
        super().__init__()
        self.left_bias, self.right_bias = left_bias, right_bias
        self.weight = nn.Parameter(torch.zeros(outputs, left_size + left_bias, right_size + right_bias))

    def forward(self, left, right):
        if self.left_bias:
            left = torch.cat([left, left.new_ones(*left.shape[:-1], 1)], -1)
        if self.right_bias:
            right = torch.cat([right, right.new_ones(*right.shape[:-1], 1)], -1)
        return torch.einsum("bxi,oij,byj->bxyo", left, self.weight, right)


class PairScorer(nn.Module):
    """A score for each pair (x, y) of two sequences' vectors: each side through its own MLP, then a biaffine,
    [B, X, D], [B, Y, D] -> [B, X, Y, outputs] (a span's fenceposts, an arc's dependent and head)."""

    def __init__(self, in_size, mlp_size, outputs, dropout, left_bias=True, right_bias=True):
        super().__init__()
        self.left = MLP(in_size, mlp_size, dropout)
        self.right = MLP(in_size, mlp_size, dropout)
        self.biaffine = Biaffine(mlp_size, mlp_size, outputs, left_bias=left_bias, right_bias=right_bias)

    def forward(self, left, right):
        return self.biaffine(self.left(left), self.right(right))


class CharacterEncoder(nn.Module):
    """Each word's characters -> one vector, the last states of a BiLSTM over them (both directions).

    char_ids [B, T, C] (0 = padding) -> [B, T, hidden_size]; a position without characters (padding) gets zeros."""

    def __init__(self, num_chars, embedding_size, hidden_size):
        super().__init__()
        self.embed = nn.Embedding(num_chars, embedding_size, padding_idx=0)
        self.lstm = nn.LSTM(embedding_size, hidden_size // 2, batch_first=True, bidirectional=True)
        self.hidden_size = hidden_size

    def forward(self, char_ids):
        batch, length, width = char_ids.shape
        flat = char_ids.reshape(batch * length, width)
        counts = (flat != 0).sum(-1)
        present = counts > 0
        out = flat.new_zeros(batch * length, self.hidden_size, dtype=self.embed.weight.dtype)
        if present.any():
            packed = pack_padded_sequence(self.embed(flat[present]), counts[present].cpu(), batch_first=True,
                                          enforce_sorted=False)
            _, (last, _) = self.lstm(packed)
            out[present] = torch.cat([last[0], last[1]], -1)
        return out.view(batch, length, self.hidden_size)


class WordEncoder(nn.Module):
    """Positions -> vectors [B, T, config.word_vector_size] (module docstring)."""

    def __init__(self, config):
        super().__init__()
        self.kind = config.encoder
        if self.kind == "pretrained":
            from transformers import AutoConfig, AutoModel

            settings = dict(config.pretrained_encoder)
            self.pretrained = AutoModel.from_config(AutoConfig.for_model(settings.pop("model_type"), **settings))
            self.pooling = config.encoder_pooling
            self.output_dropout = nn.Dropout(config.embedding_dropout)
            return
        self.word_embeddings = nn.Embedding(config.vocab_size, config.word_embedding_size, padding_idx=0)
        self.characters = CharacterEncoder(config.num_chars, config.char_embedding_size, config.char_hidden_size)
        self.input_dropout = nn.Dropout(config.embedding_dropout)
        self.lstm = nn.LSTM(config.word_embedding_size + config.char_hidden_size, config.lstm_hidden_size,
                            num_layers=config.lstm_layers, batch_first=True, bidirectional=True,
                            dropout=config.lstm_dropout if config.lstm_layers > 1 else 0.0)
        self.output_dropout = nn.Dropout(config.lstm_dropout)

    def forward(self, input_ids, attention_mask, char_ids=None, piece_ids=None, piece_attention_mask=None,
                word_piece_spans=None):
        if self.kind == "pretrained":
            if piece_ids is None or word_piece_spans is None:
                raise ValueError("a parser over a pretrained encoder reads piece_ids and word_piece_spans (its "
                                 "tokenizer writes them)")
            states = self.pretrained(input_ids=piece_ids, attention_mask=piece_attention_mask).last_hidden_state
            return self.output_dropout(pool_pieces(states, word_piece_spans, self.pooling))
        if char_ids is None:
            raise ValueError("a parser with an lstm encoder reads char_ids (its tokenizer writes them)")
        vectors = torch.cat([self.word_embeddings(input_ids), self.characters(char_ids)], -1)
        lengths = attention_mask.sum(-1)
        packed = pack_padded_sequence(self.input_dropout(vectors), lengths.cpu(), batch_first=True,
                                      enforce_sorted=False)
        states, _ = pad_packed_sequence(self.lstm(packed)[0], batch_first=True, total_length=input_ids.shape[1])
        return self.output_dropout(states)


def _at(states, index):
    """states [B, P, D] at index [B, T] (clamped into [0, P)) -> [B, T, D]."""
    index = index.clamp(0, states.shape[1] - 1)
    return states.gather(1, index[..., None].expand(-1, -1, states.shape[-1]))


def pool_pieces(states, spans, pooling):
    """Per position, the first, last or mean of its pieces' states: states [B, P, D], spans [B, T, 2] -> [B, T, D].
    A span [s, s) (padding) gives zeros."""
    start, end = spans[..., 0], spans[..., 1]
    if pooling == "first":
        pooled = _at(states, start)
    elif pooling == "last":
        pooled = _at(states, end - 1)
    else:  # differences of running sums: every position's mean in one gather
        sums = torch.cat([states.new_zeros(states.shape[0], 1, states.shape[-1]), states.cumsum(1)], 1)
        pooled = (_at(sums, end) - _at(sums, start)) / (end - start).clamp(min=1)[..., None]
    return pooled.masked_fill((end <= start)[..., None], 0.0)
