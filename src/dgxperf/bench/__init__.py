"""`dgxperf bench`: what the hardware really delivers — GEMM, HBM, PCIe, P2P, NCCL — against its peaks."""
