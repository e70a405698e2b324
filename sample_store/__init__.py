"""A small fashion store served on 127.0.0.1: the main job's embedded source and the crawl test bed.

    from lookbench_live.sample_store.server import SampleStore
    from lookbench_live.sample_store.sites import sample_sites

    with SampleStore(clock=as_of) as store:   # a free port; `store.base_url`
        sites = sample_sites(store.base_url)  # ordinary SiteSettings, loopback allowed per site
        truth = store.catalog()                # category + attributes per product

The catalogue is a function of the store's clock (see `catalog` for the timeline): at
`clock` it serves what a real store would have shown then, new arrivals every week, new
looks every month, removals, price changes, new photos and re-uploaded near copies.
`products_per_week` sizes it (benchmarks stand it in for a large retailer).

A layer of its own above the stages: only `flows` and the CLI import it, and it imports no
stage (pyproject.toml's import contract). This module imports nothing, so that the CLI's
`sample-store` command (`cli.py`) costs nothing at start-up; `server` (the HTTP server),
`catalog` (the timeline), `pages` and `images` (what it serves) and `sites` are its parts.
"""
