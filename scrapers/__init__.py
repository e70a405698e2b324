"""lookbench_live.scrapers"""
