"""JSON Schemas of the results dgxperf prints with --json and keeps in the run store."""
