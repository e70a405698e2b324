"""lookbench_live.annotation"""
