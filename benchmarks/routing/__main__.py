"""``python -m benchmarks.routing``: writes the routing section of benchmarks/RESULTS.md (report.py)."""

from benchmarks.routing.report import main

raise SystemExit(main())
