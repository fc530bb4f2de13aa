"""The file names a `dgxperf pretrain` folder holds.

Kept apart from ``train/pretrain.py`` so that code which only checks a folder (``validate``'s option
checks) can name them without importing PyTorch, which costs seconds before a one-line usage error.
"""

ENCODER_FILE = "encoder.pt"
TOKENIZER_FILE = "tokenizer.json"
CHECKPOINT_FILE = "checkpoint.pt"
