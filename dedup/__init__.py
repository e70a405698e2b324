"""lookbench_live.dedup"""
