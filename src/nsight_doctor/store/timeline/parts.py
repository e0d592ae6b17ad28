"""Whether one level of recurring signatures is a part of another (steps.choose_level): a layer
of a step recurs a whole number of times (2 or more) in each of the step's periods. The counts
alone can say so by chance: a signature that runs once per UNet pass and twice more in the
image decoders (62 times) recurs 7.75 times as often as the text encoder's GEMMs (8 times,
all at the two images' starts), close enough to 8. So the occurrences are counted in each
period of the coarser level too.
"""

from __future__ import annotations

import polars as pl


def ratio_fits(fine: dict, coarse: dict) -> bool:
    """Whether `fine` recurs a whole number of times (2 or more) as often as `coarse`, a level
    that holds a GEMM (a forward pass's own work, such as the vocabulary projection)."""
    if not coarse["gemm"] or coarse["n"] >= fine["n"]:
        return False
    ratio = fine["n"] / coarse["n"]
    return ratio >= 1.9 and abs(ratio - round(ratio)) <= 0.05 * ratio


def evenly(fine: pl.Series, coarse: pl.Series) -> bool:
    """Whether the sorted positions `fine` fall, in the median period between consecutive
    positions of `coarse` (sorted), as many times as their counts' ratio says (2 or more): a
    step cut by the capture, a prompt's pass, or an anchor that runs a little earlier or later
    in some periods (a kernel of another stream) changes some periods, not most."""
    if coarse.len() < 2:
        return False
    per = fine.search_sorted(coarse).diff().drop_nulls()  # (occurrences in each period)
    k = round(fine.len() / coarse.len())
    return k >= 2 and per.median() == k


def parts(lv: pl.DataFrame, occ: pl.DataFrame, key_id: pl.Expr) -> set[tuple[int, object, object]]:
    """(device_id, fine anchor, coarse anchor) of the levels (steps.levels) whose counts fit a
    part (ratio_fits) and whose anchors' occurrences (steps.signature_stats) show it: the fine
    one's fall evenly into the coarse one's periods."""
    rows = list(lv.iter_rows(named=True))
    pairs = [
        (f["device_id"], f["anchor"], c["anchor"])
        for f in rows
        for c in rows
        if f["device_id"] == c["device_id"] and ratio_fits(f, c)
    ]
    if not pairs:
        return set()
    anchors = pl.DataFrame(
        {"device_id": [d for d, *_ in pairs for _ in (0, 1)], "anchor": [a for _, *ab in pairs for a in ab]},
        schema={"device_id": pl.Int32, "anchor": lv.schema["anchor"]},
    ).unique()
    seqs = (
        occ.join(anchors.with_columns(kid=key_id), on=["device_id", "kid"], how="semi")
        .group_by("device_id", "kid")
        .agg(pl.col("seq").sort())
    )
    by = {(r["device_id"], r["kid"]): pl.Series(r["seq"]) for r in seqs.iter_rows(named=True)}
    kid = dict(zip(anchors.rows(), anchors.select(key_id).to_series().to_list(), strict=True))
    empty = pl.Series([], dtype=pl.Int64)
    return {(d, f, c) for d, f, c in pairs if evenly(by.get((d, kid[(d, f)]), empty), by.get((d, kid[(d, c)]), empty))}
