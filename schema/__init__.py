"""lookbench_live.schema"""
