"""What the two tree CRFs (span_crf.py, projective_crf.py) share: the score tensors and lengths they accept, the two semirings
their inside charts run in (log-space sums for log Z and sampling, max for the best tree) and the Gumbel-max draw of
backward sampling.

Hub code: imports only torch.
"""

import torch


def working_scores(scores, dims, layout):
    """`scores` as the charts compute them: a float tensor of `dims` dimensions (`layout` names them for the
    error), [*, N+1, N+1, ...] with N >= 1; half precision in float32 (log Z is made of small differences). A
    ValueError naming the shape otherwise."""
    if not torch.is_tensor(scores) or scores.dim() != dims or scores.shape[1] != scores.shape[2] or scores.shape[1] < 2:
        shape = tuple(scores.shape) if torch.is_tensor(scores) else type(scores).__name__
        raise ValueError(f"scores must be a float tensor {layout} with N >= 1, got {shape}")
    if scores.dtype in (torch.float16, torch.bfloat16):
        return scores.float()
    if not scores.is_floating_point():
        raise ValueError(f"scores must be a float tensor, got {scores.dtype}")
    return scores


def checked_lengths(scores, lengths, layout):
    """`lengths` as a long tensor [B] on scores' device, each 1 <= n <= N (scores [B, N+1, ...], `layout` names
    them); a ValueError naming the first sentence out of range otherwise."""
    batch, n_max = scores.shape[0], scores.shape[1] - 1
    lengths = torch.as_tensor(lengths, device=scores.device)
    if lengths.shape != (batch,) or lengths.is_floating_point():
        raise ValueError(f"lengths must be an integer tensor [B] = [{batch}], got {tuple(lengths.shape)} "
                         f"{lengths.dtype}")
    lengths = lengths.long()
    bad = torch.nonzero((lengths < 1) | (lengths > n_max)).flatten()
    if len(bad):
        b = int(bad[0])
        raise ValueError(f"lengths[{b}] = {int(lengths[b])}: each sentence needs 1 <= length <= N = {n_max} "
                         f"(scores are {layout})")
    return lengths


def log_sum(values, dim):
    """The inside algorithm's sum, in log space (log Z, marginals by autograd, sampling)."""
    return torch.logsumexp(values, dim)


def maximum(values, dim):
    """The Viterbi semiring's sum (the best tree)."""
    return values.amax(dim)


def gumbel_max_sampler(generator=None):
    """pick(logits [..., K]) -> a draw from softmax(logits) along the last dimension, [...]: the argmax of the logits
    plus Gumbel noise (the clamp keeps log(-log u) finite), from `generator` for reproducible draws."""

    def pick(logits):
        uniform = torch.rand(logits.shape, generator=generator, dtype=logits.dtype, device=logits.device)
        uniform = uniform.clamp(min=torch.finfo(logits.dtype).tiny)
        return (logits - torch.log(-torch.log(uniform))).argmax(-1)

    return pick
