"""Advisor rules, one module per family: ``bandwidth`` (DRAM, PCIe), ``input_pipeline`` (utilisation swing,
CPU-bound loading, I/O wait), ``launch`` (the GPU's own process sets its pace), ``compute`` (tensor-core
use), ``memory`` (capacity), ``health`` (throttling, hardware errors). Each module lists its rules in
``RULES``; the engine's ``ALL_RULES`` joins them in that order."""
