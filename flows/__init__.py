"""lookbench_live.flows"""
