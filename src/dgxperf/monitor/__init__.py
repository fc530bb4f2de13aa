"""`dgxperf monitor`, `exporter`, `grafana`: second-by-second GPU and host telemetry (guide A §6, guide B §4.1)."""
