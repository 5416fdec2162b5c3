"""`make bench`: runs every benchmark module in bench/ (each defines `main()`), in name order."""

from __future__ import annotations

import importlib
import pkgutil
import time

import bench


def main() -> None:
    for module_info in sorted(pkgutil.iter_modules(bench.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"bench.{module_info.name}")
        run = getattr(module, "main", None)
        if module_info.name.startswith("_") or run is None:
            continue
        print(f"\n=== bench.{module_info.name} ===", flush=True)
        started = time.monotonic()
        run()
        print(f"(bench.{module_info.name} took {time.monotonic() - started:.1f} s)", flush=True)


main()
