"""lookbench_live.generation"""
