"""Test and bench machinery: loopback servers, the real-vLLM harness, dedup calibration images.

Not used by the pipeline itself; shipped so that benches and the test suite share one copy.
"""
