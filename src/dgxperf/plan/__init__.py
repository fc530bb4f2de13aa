"""`dgxperf plan`: plans that are printed for a person to review, never executed.

:mod:`dgxperf.plan.mig` plans MIG (Multi-Instance GPU) layouts for A100, H100 and H200 GPUs from NVIDIA's
profile and placement tables; :mod:`dgxperf.plan.memory` predicts peak GPU memory. Their commands live at
the CLI edge (:mod:`dgxperf.cli_plan_mig`, :mod:`dgxperf.cli_plan_memory`): a capability never imports cli.
"""
