"""``python -m benchmarks.front``: writes the front data-path section of benchmarks/RESULTS.md (report.py)."""

from benchmarks.front.report import main

raise SystemExit(main())
