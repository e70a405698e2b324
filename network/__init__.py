"""lookbench_live.network: the network policy that crawl and ingest share (address guard, robots.txt, opt-outs, bounded bodies, limits)."""
