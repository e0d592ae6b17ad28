"""Writes src/nsight_doctor/ingest/cupti_cbids.csv from CUDA's CUPTI headers.

nvprof databases name CUDA API calls only by their CUPTI callback id (cbid); this table maps
the ids to names. The ids are an append-only enumeration, so a newer header covers older
files. Run where the CUDA toolkit is installed:

    python scripts/gen_cupti_cbids.py /usr/local/cuda/include
"""

import csv
import re
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "src/nsight_doctor/ingest/cupti_cbids.csv"


def main(include: str) -> None:
    rows = []
    for api, header, prefix in (
        ("runtime", "cupti_runtime_cbid.h", "CUPTI_RUNTIME_TRACE_CBID_"),
        ("driver", "cupti_driver_cbid.h", "CUPTI_DRIVER_TRACE_CBID_"),
    ):
        text = (Path(include) / header).read_text()
        for name, cbid in re.findall(rf"{prefix}(\w+)\s*=\s*(\d+)", text):
            if name in ("INVALID", "SIZE", "FORCE_INT"):
                continue
            rows.append((api, int(cbid), name))
    with open(OUT, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["api", "cbid", "name"])
        w.writerows(sorted(rows))
    print(f"wrote {len(rows)} rows to {OUT}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/usr/local/cuda/include")
