"""Tests of dgxperf.train."""
