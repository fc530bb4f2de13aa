"""`dgxperf train`: the guide's Transformer training recipe, made fast on Hopper, with honest metrics."""
