"""Prints the facts that the sample READMEs quote, read from an nsys SQLite export.

    python3 samples/nsys_facts.py CAPTURE.sqlite[.xz] [--json WORKLOAD_FACTS.json]

Standard library only (it runs on the capture machine right after the export). The optional
JSON is what `workloads/hf_serving.py --json` wrote: its forward-step count is used to pick
out the vocabulary-projection (lm_head) GEMM, the one GEMM launched once per forward step.
"""

import argparse
import itertools
import json
import lzma
import os
import re
import shutil
import sqlite3
import statistics
import tempfile

GEMM = re.compile(r"gemm|nvjet|cutlass|xmma|gemv|splitk", re.I)
ATTN = re.compile(r"softmax|sdpa|flash|fmha|attention|attn", re.I)
CAT = re.compile(r"cat", re.I)
INDEX = re.compile(r"index", re.I)


def q(c, sql, *args):
    return c.execute(sql, args).fetchall()


def has(c, table):
    return bool(q(c, "select 1 from sqlite_master where type='table' and name=?", table))


def union_ns(intervals):
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def short(name, n=90):
    return name if len(name) <= n else name[: n - 3] + "..."


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("sqlite")
    p.add_argument("--json")
    a = p.parse_args(argv)
    path, tmp = a.sqlite, None
    if path.endswith(".xz"):
        tmp = tempfile.NamedTemporaryFile(suffix=".sqlite", delete=False)
        with lzma.open(path) as src:
            shutil.copyfileobj(src, tmp)
        tmp.close()
        path = tmp.name
    try:
        facts = json.load(open(a.json)) if a.json and os.path.exists(a.json) else {}
        report(sqlite3.connect(path), facts)
    finally:
        if tmp:
            os.unlink(tmp.name)


def report(c, facts):
    forwards = facts.get("forwards") or facts.get("steps")
    K = "CUPTI_ACTIVITY_KIND_KERNEL"
    kern = (
        q(
            c,
            f"""select k.start, k.end, s.value, d.value, k.gridX, k.gridY, k.gridZ,
                        k.blockX, k.blockY, k.blockZ, k.graphNodeId
                    from {K} k join StringIds s on s.id = k.shortName
                    join StringIds d on d.id = k.demangledName order by k.start""",
        )
        if has(c, K)
        else []
    )
    mem = (
        q(
            c,
            """select m.start, m.end, m.bytes, o.label, sk.label, dk.label
                  from CUPTI_ACTIVITY_KIND_MEMCPY m
                  join ENUM_CUDA_MEMCPY_OPER o on o.id = m.copyKind
                  join ENUM_CUDA_MEM_KIND sk on sk.id = m.srcKind
                  join ENUM_CUDA_MEM_KIND dk on dk.id = m.dstKind""",
        )
        if has(c, "CUPTI_ACTIVITY_KIND_MEMCPY")
        else []
    )
    mset = q(c, "select start, end from CUPTI_ACTIVITY_KIND_MEMSET") if has(c, "CUPTI_ACTIVITY_KIND_MEMSET") else []
    api = (
        q(
            c,
            """select r.start, r.end, s.value from CUPTI_ACTIVITY_KIND_RUNTIME r
                  join StringIds s on s.id = r.nameId""",
        )
        if has(c, "CUPTI_ACTIVITY_KIND_RUNTIME")
        else []
    )
    # Event timestamps count from the start of the analysis window (0 .. duration).
    sess = q(c, "select duration from ANALYSIS_DETAILS")
    t0, dur = 0, sess[0][0] if sess else 0

    print(f"capture: {dur / 1e6:.1f} ms (analysis window)")
    gpu = [(k[0], k[1]) for k in kern] + [(m[0], m[1]) for m in mem] + list(mset)
    if gpu:
        g0, g1 = min(s for s, _ in gpu), max(e for _, e in gpu)
        kbusy = union_ns([(k[0], k[1]) for k in kern])
        print(
            f"GPU activity span: {(g1 - g0) / 1e6:.1f} ms, from +{(g0 - t0) / 1e6:.1f} ms;"
            f" kernels busy {kbusy / 1e6:.1f} ms = {100 * kbusy / max(g1 - g0, 1):.1f}% of the span;"
            f" kernels+copies+memsets busy {100 * union_ns(gpu) / max(g1 - g0, 1):.1f}%"
        )
    print(
        f"kernels: {len(kern)}; in CUDA graphs (graphNodeId set): "
        f"{sum(1 for k in kern if k[10] is not None)}; memcpy: {len(mem)}; memset: {len(mset)}"
    )

    # Top kernels by total time, by full (demangled) name.
    by = {}
    for k in kern:
        e = by.setdefault(k[3], [k[2], 0, 0])
        e[1] += 1
        e[2] += k[1] - k[0]
    tot = sum(e[2] for e in by.values()) or 1
    print("top 8 kernels by total time (short name | count | total ms | % | avg us | demangled):")
    for dname, (sname, n, t) in sorted(by.items(), key=lambda x: -x[1][2])[:8]:
        print(
            f"  {short(sname, 60)} | {n} | {t / 1e6:.2f} | {100 * t / tot:.1f}% | {t / n / 1e3:.1f}"
            f" | {short(dname, 110)}"
        )

    # GEMM configurations: (short name, grid, block).
    groups = {}
    for k in kern:
        if GEMM.search(k[2]) or GEMM.search(k[3]):
            key = (k[2], k[4:7], k[7:10])
            e = groups.setdefault(key, [0, 0, []])
            e[0] += 1
            e[1] += k[1] - k[0]
            e[2].append(k[0])
    print(
        f"GEMM kernels: {sum(e[0] for e in groups.values())} in {len(groups)} (name, grid, block) groups;"
        " the 16 with the most GPU time (name | grid | block | count | avg us):"
    )
    for (sname, grid, block), (n, t, _) in sorted(groups.items(), key=lambda x: -x[1][1])[:16]:
        print(f"  {short(sname, 70)} | {grid} | {block} | {n} | {t / n / 1e3:.1f}")
    batched = [(key, e) for key, e in groups.items() if key[1][2] > 1]
    if batched:
        print("batched GEMMs (gridZ > 1):")
        for (sname, grid, block), (n, t, _) in sorted(batched, key=lambda x: -x[1][1])[:6]:
            print(f"  {short(sname, 70)} | {grid} | {block} | {n} | {t / n / 1e3:.1f}")

    # The lm_head GEMM: launched once per forward step, so its launches are spread over the
    # whole run (a prefill-only GEMM with as many launches is bunched at the start); of those,
    # the slowest (the rotary-embedding matmul also runs once per forward, but is tiny).
    lm = None
    if forwards and groups and kern:
        span = kern[-1][1] - kern[0][0]

        def spread(e):
            return e[0] > 1 and statistics.median(b - a_ for a_, b in zip(e[2], e[2][1:])) > span / forwards / 4

        for tol in (0, 1):
            cands = [(key, e) for key, e in groups.items() if abs(e[0] - forwards) <= tol and spread(e)]
            if cands:
                lm = max(cands, key=lambda x: x[1][1] / x[1][0])
                break
    if lm:
        (sname, grid, block), (n, t, starts) = lm
        print(
            f"lm_head GEMM (once per forward, {forwards} forwards): {sname} grid {grid} block {block}:"
            f" {n} launches, avg {t / n / 1e3:.1f} us"
        )
        gaps = [(b - a_) / 1e6 for a_, b in itertools.pairwise(starts)]
        if gaps:
            print(
                f"step time (between lm_head launches): first {gaps[0]:.3f} ms, median"
                f" {statistics.median(gaps):.3f} ms, min {min(gaps):.3f}, max {max(gaps):.3f};"
                f" all: {' '.join(f'{g:.2f}' for g in gaps) if len(gaps) <= 40 else '(many)'}"
            )
            # Kernels per step, and the cat / index kernels per step.
            bounds = [*starts, kern[-1][1] + 1]
            per = [[] for _ in starts]
            i = 0
            for k in kern:
                while i + 1 < len(starts) and k[0] >= bounds[i + 1]:
                    i += 1
                if k[0] >= starts[0]:
                    per[i].append(k)
            print(f"kernels per step (after each lm_head): median {statistics.median(len(s) for s in per[:-1]):.0f}")
            for label, rx in (("cat", CAT), ("index", INDEX)):
                rows = [[k for k in s if rx.search(k[2])] for s in per]
                if not any(rows):
                    continue
                print(f"{label} kernels per step (step: count, mean us, max us, sum us):")
                show = list(range(len(rows)))
                if len(show) > 14:
                    show = show[:5] + show[len(show) // 2 - 1 : len(show) // 2 + 1] + show[-6:]
                for j in show:
                    d = [(k[1] - k[0]) / 1e3 for k in rows[j]]
                    if d:
                        print(f"  {j}: {len(d)}, {statistics.mean(d):.2f}, {max(d):.2f}, {sum(d):.1f}")
    elif forwards:
        print(f"lm_head GEMM: no GEMM group has {forwards} launches (shapes vary per step)")

    for label, rx in (("attention-related", ATTN), ("cat", CAT), ("index", INDEX)):
        rows = {}
        for k in kern:
            if rx.search(k[2]):
                e = rows.setdefault(k[2], [0, 0, 0])
                e[0] += 1
                e[1] += k[1] - k[0]
                e[2] = max(e[2], k[1] - k[0])
        if rows:
            print(f"{label} kernels (short name | count | total ms | avg us | max us):")
            for sname, (n, t, mx) in sorted(rows.items(), key=lambda x: -x[1][1])[:8]:
                print(f"  {short(sname, 100)} | {n} | {t / 1e6:.2f} | {t / n / 1e3:.2f} | {mx / 1e3:.2f}")

    if mem:
        print("memcpy by kind (copyKind | src | dst | count | MB | total ms):")
        mk = {}
        for m in mem:
            e = mk.setdefault(m[3:6], [0, 0, 0])
            e[0] += 1
            e[1] += m[2]
            e[2] += m[1] - m[0]
        for (ck, sk, dk), (n, b, t) in sorted(mk.items(), key=lambda x: -x[1][0]):
            print(f"  {ck} | {sk} | {dk} | {n} | {b / 1e6:.2f} | {t / 1e6:.2f}")

    ac = {}
    for s, e, name in api:
        r = ac.setdefault(name.split("_v")[0], [0, 0])
        r[0] += 1
        r[1] += e - s
    print("CUDA API calls (name | count | total ms):")
    for name, (n, t) in sorted(ac.items(), key=lambda x: -x[1][0]):
        print(f"  {name} | {n} | {t / 1e6:.2f}")
    syncs = {k: v[0] for k, v in ac.items() if "Synchronize" in k}
    copies = {k: v[0] for k, v in ac.items() if k.startswith("cudaMemcpy")}
    print(f"sync calls: {syncs}; memcpy calls: {copies}")

    # Timeline in 16 slices of the capture: what the GPU did when (the phases of a run).
    if dur and gpu:
        n = 16
        w = dur / n
        print(
            f"timeline ({n} slices of {w / 1e6:.1f} ms: kernel busy % | copy busy % | kernels | "
            "HtoD MB | syncs | cudaMalloc):"
        )
        for j in range(n):
            a_, b = t0 + j * w, t0 + (j + 1) * w
            kb = union_ns([(max(s, a_), min(e, b)) for s, e, *_ in kern if s < b and e > a_])
            mb = union_ns([(max(m[0], a_), min(m[1], b)) for m in mem if m[0] < b and m[1] > a_])
            nk = sum(1 for k in kern if a_ <= k[0] < b)
            h2d = sum(m[2] for m in mem if a_ <= m[0] < b and m[3] == "Host-to-Device") / 1e6
            ns = sum(1 for s, e, nm in api if a_ <= s < b and "Synchronize" in nm)
            nmal = sum(1 for s, e, nm in api if a_ <= s < b and nm.startswith("cudaMalloc"))
            print(
                f"  {j:2d} +{(a_ - t0) / 1e6:8.1f} ms: {100 * kb / w:5.1f} | {100 * mb / w:5.1f} | {nk:6d} |"
                f" {h2d:8.1f} | {ns:5d} | {nmal}"
            )


if __name__ == "__main__":
    main()
