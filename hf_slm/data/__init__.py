"""Dataset loaders (PTB, BLLIP-LG, XSum, CoNLL-U) returning datasets.DatasetDict."""
