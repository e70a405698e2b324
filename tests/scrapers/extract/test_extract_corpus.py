"""Extraction measured on real retailer payloads (tests/corpus, sources in tests/corpus/SOURCES.md).

Each payload has hand-written expected facts (tests/corpus/expected/<name>.json). A fact is
right when the extractor's value matches; a stated fact that comes out missing or different is
wrong; a colour or material that comes out where the page states none (or a different one) is
*invented*, counts as wrong, and must never happen: a wrong fact is worse than a missing one.

Run `python tests/scrapers/extract/test_extract_corpus.py` for the per-payload table.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import pytest

from lookbench_live.schema.taxonomy import default_taxonomy
from lookbench_live.scrapers.extract import Extraction, decode_body, extract_document

CORPUS = Path(__file__).parents[2] / "corpus"
FACTS = (
    "title", "price", "currency", "image", "brand", "product_id", "availability", "color", "material",
    "category",
)  # fmt: skip
NO_INVENTION = ("color", "material")  # absent or different in expected = invented
# Every payload belongs to one split: "dev" (the rules were written looking at these) or
# "heldout" (42 payloads set aside before labelling, scored once per change, never tuned on).
SPLITS = ("dev", "heldout")


def _norm(text: Any) -> str:
    plain = unicodedata.normalize("NFKC", str(text)).casefold()
    return " ".join(re.sub(r"[^\w%]+", " ", plain).split())


def _composition(text: str) -> set[tuple[str, str]]:
    """{(percent, fibre)} of "41% Baumwolle, 33% Viskose" or "Baumwolle 60%; Polyester 40%" (one
    way or the other: in "65% Poliéster 35% Algodão" the 35 is not the polyester's)."""
    pairs = re.findall(r"(\d{1,3})\s*%\s*([^\W\d_]+)", text)
    pairs = pairs or [(p, w) for w, p in re.findall(r"([^\W\d_]+)\s+(\d{1,3})\s*%", text)]
    return {(p, w.casefold()) for p, w in pairs}


def _same(fact: str, got: Any, want: Any) -> bool:
    if isinstance(want, list) and fact != "category":
        return any(_same(fact, got, w) for w in want)
    if fact == "category" and isinstance(want, list) and want and all(isinstance(w, list) for w in want):
        return any(_same(fact, got, w) for w in want)  # two paths the page states (breadcrumb, meta)
    if got is None or want is None:
        return got is None and want is None
    if fact == "price":
        try:
            return Decimal(str(got)) == Decimal(str(want))
        except InvalidOperation:
            return False
    if fact == "category":
        return [_norm(c) for c in got] == [_norm(c) for c in want]
    if fact == "color":
        taxonomy = default_taxonomy()
        a, b = taxonomy.normalize_value("color", str(got)), taxonomy.normalize_value("color", str(want))
        return (a is not None and a == b) or _norm(got) == _norm(want)
    if fact == "material":
        a, b = _composition(str(got)), _composition(str(want))
        return a == b if (a or b) else _norm(got) == _norm(want)
    if fact == "image":
        return str(got).strip() == str(want).strip()
    return _norm(got) == _norm(want)


def _value(product: dict[str, Any] | None, fact: str) -> Any:
    if product is None:
        return None
    if fact == "image":
        return (product.get("images") or [None])[0]
    if fact == "category":
        return product.get("category_path") or None
    return product.get(fact)


@dataclass
class Score:
    right: int = 0
    total: int = 0
    invented: list[str] = field(default_factory=list)
    misses: list[str] = field(default_factory=list)

    @property
    def accuracy(self) -> float:
        return self.right / self.total if self.total else 1.0


# What runs after the rules, as `extract --vlm` runs it: (extraction, page text, url) -> extraction.
Complete = Callable[[Extraction, str, str], Extraction]


def measure(
    complete: Complete | None = None, names: Collection[str] | None = None
) -> tuple[dict[str, Score], list[tuple[str, str, Score]]]:
    """Scores by group ("all", "messy", "clean", and per platform) and per payload (name, split, score).

    `complete`: a last resort run on each page after the rules (the VLM's, with `--vlm`);
    `names`: only these payloads (stems)."""
    groups: dict[str, Score] = {}
    rows = []
    for path in sorted((CORPUS / "expected").glob("*.json")):
        if names is not None and path.stem not in names:
            continue
        case = json.loads(path.read_text(encoding="utf-8"))
        payload = next((CORPUS / "payloads").glob(path.stem + ".*"))
        text = decode_body(payload.read_bytes())
        extraction = extract_document(text, case["url"])
        if complete is not None:
            extraction = complete(extraction, text, case["url"])
        product = extraction.products[0].to_json() if extraction.products else None
        score = Score()
        for fact in FACTS:
            if fact not in case["facts"]:
                continue
            want, got = case["facts"][fact], _value(product, fact)
            stated = want is not None
            if not stated and (got is None or fact == "product_id"):
                continue  # every product has a key; one the page does not state is not a fact
            score.total += 1
            if _same(fact, got, want):
                score.right += 1
                continue
            score.misses.append(f"{fact}: got {got!r}, want {want!r}")
            if got is not None and (fact in NO_INVENTION or not stated):
                score.invented.append(f"{payload.name}: {fact} {got!r} (want {want!r})")
        split = case.get("split", "dev")
        rows.append((payload.name, split, score))
        kind = "messy" if case["messy"] else "clean"
        keys = [split, f"{split}:{kind}", f"{split}:platform:{case['platform']}"]
        for key in keys:
            group = groups.setdefault(key, Score())
            group.right += score.right
            group.total += score.total
            group.invented += score.invented
    return groups, rows


def report(groups: dict[str, Score]) -> str:
    return "\n".join(
        f"{key:28s} {g.right:4d}/{g.total:<4d} {100 * g.accuracy:6.1f}%  invented={len(g.invented)}"
        for key, g in sorted(groups.items())
    )


def test_corpus_is_real_sized_and_documented():
    payloads = sorted((CORPUS / "payloads").iterdir())
    expected = {p.stem for p in (CORPUS / "expected").glob("*.json")}
    assert len(payloads) >= 40
    assert {p.name.rsplit(".", 1)[0] for p in payloads} == expected
    assert all(p.stat().st_size < 200_000 for p in payloads)
    # 5 MB until issue 27's visible-page pages (Amazon pages trimmed to ~100 kB each) grew the dev split;
    # 8 MB until its marketplace round (eBay, Flipkart, Mercado Libre and more pages, ~150 kB each);
    # 10 MB until its storefront round (15 pages of the held-out split's kinds, ~80 kB each);
    # 12 MB until its seventh round (15 more US storefronts and pages with no product markup);
    # 13 MB until its eighth round (older shops' pages and pages that are not a product);
    # 14 MB until its ninth round (six more 2010 shops' pages); 15 MB until its eleventh (eleven
    # pages from sources not used before); 16 MB until its twelfth (fourteen more); 17 MB until
    # its thirteenth (25 fashion and home pages saved in 2025).
    assert sum(p.stat().st_size for p in payloads) < 19_000_000
    splits = [
        json.loads(p.read_text(encoding="utf-8")).get("split", "dev")
        for p in (CORPUS / "expected").glob("*.json")
    ]
    assert set(splits) == set(SPLITS) and splits.count("heldout") >= 40
    sources = (CORPUS / "SOURCES.md").read_text(encoding="utf-8")
    assert all(p.name in sources for p in payloads)


# Kept by the issue for independent checks: never a source of this corpus.
EXCLUDED = {
    "scrapinghub/product-extraction-benchmark",
    "wooden-ships-knits/scrapping-bot",
    "stevehaigh/vinted-scanner",
    "whyslab/price-intelligence",
    "a7medg0l0l/khsomat",
}


def test_every_payload_names_its_public_source_and_none_is_excluded():
    rows = {}
    for line in (CORPUS / "SOURCES.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 8 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = cells
    assert set(rows) == {p.name for p in (CORPUS / "payloads").iterdir()}
    for name, (_, _lang, platform, messy, repo, path, commit, _how) in rows.items():
        assert re.fullmatch(r"[\w.-]+/[\w.-]+", repo), name
        assert repo.casefold() not in EXCLUDED, name
        assert re.fullmatch(r"`[0-9a-f]{40}`", commit) and path.startswith("`"), name
        case = json.loads(
            (CORPUS / "expected" / (name.rsplit(".", 1)[0] + ".json")).read_text(encoding="utf-8")
        )
        assert (case["messy"], case["platform"]) == (messy == "yes", platform), name
    languages = {cells[1] for cells in rows.values()}
    assert len(languages) >= 3 and len({cells[2] for cells in rows.values()}) >= 4


# The goal is 97% of facts (messy 90%) on both splits. Each split is held to what was
# last measured (docs/scrapers.md): held-out 158/192, messy 104/138 (the visible-page round);
# dev 711/733, messy 529/549. The dev floor was 0.99 / 0.98 on the 63 dev payloads before that
# round; the round added 36 harder ones (21 visible-HTML pages, 15 platform pages from another
# branch), so the split's figure fell while those 63 still score 465/469, unchanged. Both floors
# also hold each split to no invented fact. Issue 27's third round: general visible-page rules
# (branch xrules: 711/733 -> 719/733), eleven marketplace dev pages (branch xcorpus) and their rules
# (extract/page_extras.py, branch xrules2); merged, dev 781/798 = 97.9%, messy 578/594 = 97.3%: the
# dev floor since. The held-out split does not meet the goal yet.
# Fourth round merged (rules4 with the corpus4 and corpus4b dev pages: 21 harder pages, Korean,
# Chinese, marketplaces): dev 859/926 = 92.8%, messy 655/722 = 90.7%; with the site-name and
# category-arrow rules after it 861/926 = 93.0%, messy 657/722 = 91.0%, the floor since.
# Fifth round (marketplaces and shared conventions): dev 897/926 = 96.9%, messy 693/722 = 96.0%,
# the floor since; held-out unchanged.
# Sixth round (storefronts of the held-out split's kinds: 15 dev pages scored 86/117 before any rule
# for them, 1010/1040 after; 8 more scored 47/59 under those rules, then the review's narrowing):
# dev 1065/1099 = 96.9%, messy 861/895 = 96.2%; held-out unchanged.
# Seventh round (24 US department, home and speciality store pages and pages with no product
# markup, scored 58/81, 20/31 and 60/70 before the rules each batch showed; 159/181 after):
# dev 1224/1280 = 95.6%, messy 1020/1076 = 94.8%; held-out unchanged.
# Eighth round (older shops with no markup: 4 CleanEval pages scored 0/26, 5 SWDE pages 21/36
# before their rules, 42/62 after; 3 pages that are not a product): dev 1266/1342 = 94.3%, messy
# 1062/1138 = 93.3% (the pages before unchanged); held-out 163/192 = 84.9%, messy 109/138 = 79.0%,
# the first held-out change since the visible-page round. A third batch (four SWDE camera shops,
# 15/32 before their rules, 21/32 after): dev 1287/1374 = 93.7%, messy 1083/1170 = 92.6%, held-out
# unchanged. The floors since, through the ninth round (1330/1418 = 93.8%, held-out unchanged).
# Tenth round (ten more 2017 browser saves, 50/82 before their rules): dev 1390/1496 = 92.9%,
# messy 1186/1292 = 91.8% (the 200 dev payloads before: 1332/1418); held-out 164/192 = 85.4%, messy
# 110/138 = 79.7%. Eleventh round (eleven pages from sources not used before, 73/94 before its
# rules): dev 1466/1589 = 92.3%, messy 1262/1385 = 91.1% (the 210 before unchanged); held-out
# unchanged. Twelfth round (JSON-LD as templates write it; fourteen pages from sources not used
# before, 79/115 before its rules, 88/114 after): dev 1557/1703 = 91.4%, messy 1353/1499 = 90.3%
# (the 221 before: 1469/1589); held-out unchanged. Thirteenth round (25 fashion and home pages
# saved in 2025, 175/217 before its rules, 199/214 after): dev 1764/1917 = 92.0%, messy 1494/1646
# = 90.8% (the 235 before: 1565/1703); held-out unchanged. The floors since.
FLOORS = {"dev": (0.920, 0.907), "heldout": (0.854, 0.797)}


@pytest.mark.parametrize("split", SPLITS)
def test_extraction_accuracy_on_real_payloads(split):
    groups, rows = measure()
    print("\n" + report(groups))
    # Only the dev split's misses are shown: the held-out split is scored by its totals, so that no
    # rule is written from its individual misses (docs/scrapers.md, "held-out split").
    for name, payload_split, score in rows:
        if payload_split == "dev":
            for miss in score.misses:
                print(f"  {name}: {miss}")
    assert not groups[split].invented, groups[split].invented
    overall, messy = FLOORS[split]
    assert groups[split].accuracy >= overall, report(groups)
    assert groups[f"{split}:messy"].accuracy >= messy, report(groups)


def test_extract_command_gives_the_measured_facts(cli):
    """The `lookbench-live extract` command on a messy real page: what the test measures."""
    import subprocess

    case = json.loads((CORPUS / "expected" / "page_weekday-sale.json").read_text(encoding="utf-8"))
    page = CORPUS / "payloads" / "page_weekday-sale.html"
    done = subprocess.run(
        [cli, "extract", str(page), "--url", case["url"]], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    product = json.loads(done.stdout.splitlines()[0])
    for fact in ("price", "currency", "color", "material", "image"):
        assert _same(fact, _value(product, fact), case["facts"][fact]), fact


def test_the_scorer_measures_the_vlm_last_resort(tmp_path):
    """`python test_extract_corpus.py --vlm CONFIG` scores what `extract --vlm` gives: a served
    model's checked answer counts where the page states it, and an answer the page does not
    state adds nothing (against the loopback OpenAI-protocol server, keyed by the page's URL)."""
    import hashlib

    from lookbench_live.testing.loopback_server import LoopbackServer

    # A 2010 book page with no markup the rules read: nothing found without the last resort.
    name = "swde_abebooks-peoples-history-american-empire"
    url = json.loads((CORPUS / "expected" / f"{name}.json").read_text(encoding="utf-8"))["url"]
    ((_, _, alone),) = measure(names={name})[1]
    assert alone.right == 0 and alone.total == 6
    answers = {
        "stated": {"page_kind": "product", "title": "A People's History of American Empire",
                   "price": "6.95", "currency": "USD", "brand": "Metropolitan Books"},
        "invented": {"page_kind": "product", "title": "A Peoples History of the World",
                     "price": "16.95", "currency": "EUR", "brand": None},
    }  # fmt: skip
    scores = {}
    with LoopbackServer() as server:
        config = tmp_path / "lookbench.toml"
        config.write_text(
            f'[annotation]\nbase_url = "{server.base_url}"\nmodel = "loopback-vlm"\nmax_retries = 0\n'
        )
        complete = vlm_last_resort(str(config))
        for kind, answer in answers.items():
            server.state.truth[hashlib.sha256(url.encode()).hexdigest()] = answer
            ((_, _, scores[kind]),) = measure(complete, names={name})[1]
    assert scores["stated"].right == 3 and not scores["stated"].invented  # title, price, currency
    assert not any(m.startswith(("title", "price", "currency")) for m in scores["stated"].misses)
    assert scores["invented"].right == 0 and not scores["invented"].invented


def vlm_last_resort(config: str) -> Complete:
    """The checked VLM last resort of `extract --vlm`, against the `[annotation]` endpoint `config` names."""
    from lookbench_live.config import load_settings
    from lookbench_live.scrapers.extract.vlm import complete_with_vlm

    settings = load_settings(config).annotation
    if not settings.endpoints:
        raise SystemExit(f"--vlm needs an [annotation] base_url in {config}")
    return lambda extraction, text, url: complete_with_vlm(extraction, text, url, settings)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="Extraction scored on the corpus (held-out: totals only).")
    parser.add_argument(
        "--vlm", metavar="CONFIG", help="add the VLM last resort, as `extract --vlm --config CONFIG`"
    )
    args = parser.parse_args()
    found, table = measure(vlm_last_resort(args.vlm) if args.vlm else None)
    for name, payload_split, score in table:
        shown = score.misses if payload_split == "dev" else ["(held out: totals only)"]
        print(f"{name:48s} {score.right}/{score.total}  " + "; ".join(shown))
    print(report(found))
