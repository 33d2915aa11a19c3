"""Pearson's chi-square goodness-of-fit test, for the tests that check a sampler's frequencies against its exact
probabilities (tests/test_span_crf.py, tests/test_projective_crf.py): scipy is not a dependency."""

import math

Z_99_9 = 3.090232  # the standard normal's 0.999 quantile


def chi_square_passes(counts, expected):
    """Pearson's chi-square goodness of fit at significance 0.001, categories with expected count < 5 pooled (and
    the pool grown from the next smallest until it expects 5). The critical value is Wilson-Hilferty's."""
    pairs = sorted(zip(expected, counts))
    pooled_expected = pooled_count = 0.0
    while pairs and (pairs[0][0] < 5 or 0 < pooled_expected < 5):
        e, c = pairs.pop(0)
        pooled_expected, pooled_count = pooled_expected + e, pooled_count + c
    if pooled_expected > 0:
        pairs.append((pooled_expected, pooled_count))
    statistic = sum((c - e) ** 2 / e for e, c in pairs)
    df = len(pairs) - 1
    critical = df * (1 - 2 / (9 * df) + Z_99_9 * math.sqrt(2 / (9 * df))) ** 3
    return statistic, critical, df
