"""The front's data-path cost (``python -m benchmarks.front``): our front as the gate and as the P/D proxy beside
nginx, vllm-router and vLLM's example P/D proxy, each in front of instant compiled stand-ins (go/standin), loaded
by a compiled load generator (go/load); writes its section of benchmarks/RESULTS.md (report.py)."""
