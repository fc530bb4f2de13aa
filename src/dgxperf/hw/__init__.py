"""The only code that touches NVML, /proc, /sys and nvidia-smi."""
