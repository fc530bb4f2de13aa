"""`dgxperf plan`: plans that are printed for a person to review, never executed.

:mod:`dgxperf.plan.mig` plans MIG (Multi-Instance GPU) layouts for A100, H100 and H200 GPUs from NVIDIA's
profile and placement tables; :mod:`dgxperf.plan.mig_cli` is its ``dgxperf plan mig`` command.
"""
