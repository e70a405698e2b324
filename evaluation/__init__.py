"""lookbench_live.evaluation"""
