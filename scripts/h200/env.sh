# shellcheck shell=bash
# Sourced by every capture script that runs on a lent GPU machine: the checkout's dgxperf, unbuffered
# logs, a wide terminal for Rich's tables, and NVLink multicast off (the lent machines' rule, KINDS.md),
# exported so torchrun's workers inherit it.
export PYTHONPATH=src PYTHONUNBUFFERED=1 COLUMNS="${COLUMNS:-160}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
