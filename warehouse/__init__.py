"""lookbench_live.warehouse"""
