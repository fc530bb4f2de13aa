"""Reports that compose capabilities (validate); they never reimplement them."""
