"""dgxperf: is my node set up right, what does it deliver, and why is my training job slow."""

__version__ = "0.1.0"
